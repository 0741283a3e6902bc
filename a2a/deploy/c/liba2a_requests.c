/* liba2a's MPI_Ialltoall(v), MPI_Alltoall_init (and their large-count forms) and the requests they return: served
   as the blocking calls are where the executor progresses inside MPI (liba2a_nonblocking.c says how), else passed
   to the MPI library, counted */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <stdlib.h>

#ifdef A2AX_MPI_PROGRESS
/* what the program's MPI_Wait or MPI_Test gets: the exchange's first MPI error, MPI_SUCCESS where none */
static int pending_query(void *extra, MPI_Status *status) {
    pending *q = extra;
    int bad = PMPI_Status_set_elements_x(status, MPI_BYTE, 0) != MPI_SUCCESS;
    bad |= PMPI_Status_set_cancelled(status, 0) != MPI_SUCCESS;
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = q->error;
    return q->error != MPI_SUCCESS ? q->error : bad ? MPI_ERR_INTERN : MPI_SUCCESS;
}

static int pending_free(void *extra) { /* the program's MPI_Wait or MPI_Test found it complete */
    pending *q = extra;
    if (q->transient) a2ax_free(q->plan);
    free(q);
    return MPI_SUCCESS;
}

static int pending_cancel(void *extra, int complete) { /* a collective cannot be cancelled: it completes */
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

/* the exchange ended (from MPI's progress): its error kept for pending_query, said where it ends the job */
static void pending_done(void *arg, a2ax_error error) {
    pending *q = arg;
    q->error = error.code;
    if (error.code != MPI_SUCCESS && q->fatal) said_failed(q->call, q->schedule, error.call, error.code);
    A2AX_CHECKED(NULL, PMPI_Grequest_complete(q->request)); /* where it fails, MPI says so at the program's wait */
}

/* serve a non-blocking call (1, its result in *result), else 0: the caller passes it on */
static int served_nonblocking(const char *call, int collective, const void *send, void *recv, MPI_Count send_bytes,
                              MPI_Count recv_bytes, MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks,
                              MPI_Comm comm, MPI_Request *request, int *result) {
    int why, transient;
    nb_state *state;
    const char *schedule = NULL;
    a2ax_plan *plan = planned_nonblocking(collective, send, recv, send_bytes, recv_bytes, st, rt, blocks, comm, 0,
                                          &transient, &state, &why, &schedule);
    pending *q = plan ? malloc(sizeof *q) : NULL;
    if (!q) {
        if (plan && transient) a2ax_free(plan);
        return passed(collective, plan ? PREPARE : why);
    }
    *q = (pending){MPI_REQUEST_NULL, plan, transient, fatal_handler(comm), MPI_SUCCESS, call, schedule};
    if (PMPI_Grequest_start(pending_query, pending_free, pending_cancel, q, &q->request) != MPI_SUCCESS) {
        pending_free(q);
        return passed(collective, PREPARE);
    }
    next_tags(state, plan);
    if (a2ax_start_then(plan, pending_done, q) != 0) /* cannot happen (an idle plan, a progress mode that runs it) */
        pending_done(q, (a2ax_error){a2ax_run(plan), a2ax_failed(plan).call});
    *request = q->request;
    *result = MPI_SUCCESS;
    return 1;
}

/* a persistent request of this library's, or NULL (looked for under the.lock: any thread may free a request) */
static persistent *ours(const MPI_Request *request) {
    if (!__atomic_load_n(&nb.persistents, __ATOMIC_ACQUIRE)) return NULL; /* none: no lock for the program's own */
    pthread_mutex_lock(&the.lock);
    persistent *r = nb.persistents;
    while (r && r->request != *request) r = r->next;
    pthread_mutex_unlock(&the.lock);
    return r;
}

static int served_persistent(const void *send, void *recv, MPI_Count send_bytes, MPI_Count recv_bytes,
                             MPI_Datatype st, MPI_Datatype rt, MPI_Comm comm, MPI_Request *request, int *result) {
    int why, transient, found, *bound_of_tags;
    nb_state *state;
    const char *schedule = NULL;
    a2ax_plan *plan = planned_nonblocking(ALLTOALL, send, recv, send_bytes, recv_bytes, st, rt, NULL, comm, 1,
                                          &transient, &state, &why, &schedule);
    persistent *r = plan ? malloc(sizeof *r) : NULL;
    if (r && PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound_of_tags, &found) != MPI_SUCCESS) found = 0;
    unsigned ub = r && found ? (unsigned)*bound_of_tags : 32767;
    if (r) *r = (persistent){MPI_REQUEST_NULL, plan, (int)(__atomic_fetch_add(&nb.tags, 1, __ATOMIC_RELAXED) % ub),
                             comm, schedule, state, NULL};
    if (!r || PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, r->tag, nb.self, &r->request) != MPI_SUCCESS) {
        a2ax_free(plan);
        free(r);
        return passed(ALLTOALL, plan ? PREPARE : why);
    }
    pthread_mutex_lock(&the.lock);
    state->persistents++;
    r->next = nb.persistents;
    __atomic_store_n(&nb.persistents, r, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&the.lock);
    *request = r->request;
    *result = MPI_SUCCESS;
    return 1;
}

/* a failed exchange's message: one byte into the program's zero-byte receive, so that its completion is an error */
static const char too_long = 0;

/* the exchange is complete: the program's request, a zero-byte receive on nb.self, completes by a message to it.
   A zero-byte message where the exchange succeeded; where it failed, the communicator's handler is called with the
   exchange's error (from MPI's progress: where it ends the job, after the line) and a one-byte message completes the
   receive with MPI_ERR_TRUNCATE, which nb.self's MPI_ERRORS_RETURN makes the result of the program's MPI_Wait or
   MPI_Test (MPI_Waitall's status's MPI_ERROR; MPICH raises its MPI_ERR_IN_STATUS as for its own requests); the line
   names the real error (docs/liba2a.md) */
static void persistent_done(void *arg, a2ax_error error) {
    persistent *r = arg;
    MPI_Request sent;
    int failed = error.code != MPI_SUCCESS;
    if (failed) {
        said_failed("MPI_Start (MPI_Alltoall_init's request)", r->schedule, error.call, error.code);
        A2AX_CHECKED(NULL, PMPI_Comm_call_errhandler(r->comm, error.code));
    }
    if (PMPI_Isend(&too_long, failed, MPI_BYTE, 0, r->tag, nb.self, &sent) == MPI_SUCCESS)
        A2AX_CHECKED(NULL, PMPI_Request_free(&sent));
}

void persistent_freed(persistent *r) {
    pthread_mutex_lock(&the.lock);
    persistent **at = &nb.persistents;
    while (*at != r) at = &(*at)->next;
    *at = r->next;
    int last = --r->state->persistents == 0 && r->state->orphan;
    pthread_mutex_unlock(&the.lock);
    a2ax_free(r->plan);
    if (last) release(r->state);
    free(r);
}

EXPORT int MPI_Start(MPI_Request *request) {
    persistent *r = ours(request);
    int result = PMPI_Start(request);
    if (r && result == MPI_SUCCESS) {
        if (a2ax_busy(r->plan)) /* a program that restarts before its wait completed: its rounds keep their tags */
            a2ax_wait(r->plan);  /* (its error was handed over as it ended: persistent_done) */
        next_tags(r->state, r->plan);
        if (a2ax_start_then(r->plan, persistent_done, r) != 0) /* cannot happen: an idle plan, MPI's progress */
            persistent_done(r, (a2ax_error){a2ax_run(r->plan), a2ax_failed(r->plan).call});
    }
    return result;
}

EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
    int result = MPI_SUCCESS;
    for (int i = 0; i < count && result == MPI_SUCCESS; i++) result = MPI_Start(&requests[i]);
    return result;
}

EXPORT int MPI_Request_free(MPI_Request *request) {
    persistent *r = ours(request);
    int result = PMPI_Request_free(request);
    if (r) persistent_freed(r);
    return result;
}
#endif

/* a non-blocking call served (1, its result in *result), else 0: counted, the caller passes it on */
static int nonblocking_serves(const char *call, int collective, const void *send, void *recv, MPI_Count send_bytes,
                              MPI_Count recv_bytes, MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks,
                              MPI_Comm comm, MPI_Request *request, int *result) {
    counted(&the.seen[collective]);
#ifdef A2AX_MPI_PROGRESS
    if (!the.ready || !(the.deploy || the.recording)) return passed(collective, NO_FILE);
    return served_nonblocking(call, collective, send, recv, send_bytes, recv_bytes, st, rt, blocks, comm, request,
                              result);
#else
    (void)call, (void)send, (void)recv, (void)send_bytes, (void)recv_bytes, (void)st, (void)rt, (void)blocks;
    (void)comm;
    (void)request, (void)result;
    return passed(collective, NONBLOCKING);
#endif
}

static int ialltoall_serves(const char *call, const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rc,
                            MPI_Datatype rt, MPI_Comm comm, MPI_Request *request, int *result) {
    return nonblocking_serves(call, ALLTOALL, sb, rb, sc * plain_size(st), rc * plain_size(rt), st, rt, NULL, comm,
                              request, result);
}

static int ialltoallv_serves(const char *call, const void *sb, const void *sc, const void *sd, MPI_Datatype st,
                             void *rb, const void *rc, const void *rd, MPI_Datatype rt, MPI_Comm comm,
                             enum number_kind counts, enum number_kind displs, MPI_Request *request, int *result) {
    long long *row = NULL;
    MPI_Aint *blocks = sb == MPI_IN_PLACE || !the.deploy
                           ? NULL : alltoallv_blocks(comm, sc, sd, st, rc, rd, rt, counts, displs, &row);
    int done = nonblocking_serves(call, ALLTOALLV, sb, rb, 0, 0, st, rt, blocks, comm, request, result);
    free(blocks);
    free(row);
    return done;
}

EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (ialltoall_serves("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
                         &result))
        return result;
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                          void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                          MPI_Comm comm, MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (ialltoallv_serves("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, INTS, INTS, request, &result))
        return result;
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           request);
}

#if MPI_VERSION >= 4
EXPORT int MPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                           MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (ialltoall_serves("MPI_Ialltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
                         &result))
        return result;
    return PMPI_Ialltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

EXPORT int MPI_Ialltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                            MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[],
                            const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (ialltoallv_serves("MPI_Ialltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, COUNTS, AINTS, request, &result))
        return result;
    return PMPI_Ialltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                             request);
}

/* a persistent all-to-all served (1, its result in *result), else 0: counted, the caller passes it on */
static int persistent_serves(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rc, MPI_Datatype rt,
                             MPI_Comm comm, MPI_Request *request, int *result) {
    counted(&the.seen[ALLTOALL]);
#ifdef A2AX_MPI_PROGRESS
    if (!the.ready || !(the.deploy || the.recording)) return passed(ALLTOALL, NO_FILE);
    return served_persistent(sb, rb, sc * plain_size(st), rc * plain_size(rt), st, rt, comm, request, result);
#else
    (void)sb, (void)sc, (void)st, (void)rb, (void)rc, (void)rt, (void)comm, (void)request, (void)result;
    return passed(ALLTOALL, PERSISTENT);
#endif
}

EXPORT int MPI_Alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (persistent_serves(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, &result))
        return result;
    return PMPI_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
}

EXPORT int MPI_Alltoall_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                               MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                               MPI_Request *request) {
    int result = MPI_SUCCESS;
    if (persistent_serves(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, &result))
        return result;
    return PMPI_Alltoall_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
}
#endif
