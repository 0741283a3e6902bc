/* liba2a's MPI_Alltoall and MPI_Alltoallv (and their large-count forms): each call served with the deploy file's
   schedule in the executor where the file covers it, else passed to the MPI library; timed for a learner and
   recorded where asked */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <stdlib.h>
#include <string.h>

/* Open MPI's MPI_ERRORS_ABORT (MPI 4) is a variable of libmpi that Open MPI 4.1 lacks: a strong reference would
   stop a program of 4.1 from loading liba2a at all (a symbol lookup error, exit 127) where liba2a must refuse it in a
   line and pass its calls on. Weak, it is NULL there, and no handler is it. */
#if defined(OPEN_MPI) && defined(MPI_ERRORS_ABORT)
#pragma weak ompi_mpi_errors_abort
#define ERRORS_ABORT_HERE (&ompi_mpi_errors_abort != NULL)
#elif defined(MPI_ERRORS_ABORT)
#define ERRORS_ABORT_HERE 1
#endif

int fatal_handler(MPI_Comm comm) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    if (PMPI_Comm_get_errhandler(comm, &handler) != MPI_SUCCESS) return 1;
    int fatal = handler == MPI_ERRORS_ARE_FATAL;
#ifdef ERRORS_ABORT_HERE
    fatal |= ERRORS_ABORT_HERE && handler == MPI_ERRORS_ABORT;
#endif
    return PMPI_Errhandler_free(&handler) != MPI_SUCCESS || fatal; /* MPI itself failing: the line is said */
}

void said_failed(const char *call, const char *schedule, const char *failed, int code) {
    char words[MPI_MAX_ERROR_STRING] = "";
    const char *inner = failed ? failed : "an MPI call";
    int rank, length = 0;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) rank = -1;
    if (PMPI_Error_string(code, words, &length) != MPI_SUCCESS) snprintf(words, sizeof words, "no words for it");
    fprintf(stderr, "a2a: rank %d: %s served by liba2a (schedule %s) failed: %.*s returned MPI error %d (%s)\n", rank,
            call, schedule, failed ? a2ax_call_name(failed) : (int)strlen(inner), inner, code, words);
}

int handed_to_program(MPI_Comm comm, int code, const char *call, const char *schedule, const char *failed) {
    if (fatal_handler(comm)) said_failed(call, schedule, failed, code); /* the line MPI's own abort cannot give */
    A2AX_CHECKED(NULL, PMPI_Comm_call_errhandler(comm, code)); /* where it returns: the code, as MPI's own calls */
    return code;
}

/* one blocking call in flight: its arguments in bytes and elements, and what serving it found */
typedef struct {
    const char *name;                /* the call's, as the program made it (MPI_Alltoall, MPI_Alltoallv_c, ...) */
    int collective, result;
    const void *send;
    void *recv;
    MPI_Count send_count, recv_count;
    MPI_Datatype send_type, recv_type;
    MPI_Comm comm;
    const MPI_Aint *blocks;
    const long long *row;
    learning *timing;
    double start, library_start;
    int schedule;        /* the schedule that served it, -1: none */
    a2ax_error failure;  /* where its exchange failed: the MPI call and its code */
} blocking_call;

/* run the call with its schedule if the file covers it (1, its result in call->result), else 0: the caller passes it
   on (and where call->timing is set, times it for a learner: visited) */
static int served(blocking_call *call, MPI_Count send_bytes, MPI_Count recv_bytes) {
    int inter, why, collective = call->collective;
    call->schedule = -1;
    if (!the.deploy) return passed(collective, NO_FILE);
    if (PMPI_Comm_test_inter(call->comm, &inter) != MPI_SUCCESS || inter) /* not one it can use: the library's */
        return passed(collective, INTERCOMM);
    comm_state *c = state_of(call->comm);
    if (!c) return passed(collective, PREPARE);
    if (call->send == MPI_IN_PLACE) return passed(collective, IN_PLACE);
    if (collective == ALLTOALLV && !call->blocks) return passed(collective, PREPARE); /* no memory for its blocks */
    if (!plain_size(call->send_type) || !plain_size(call->recv_type)) return passed(collective, DATATYPE);
    if (collective == ALLTOALL && send_bytes == 0) return passed(collective, EMPTY); /* alike on every rank */
    if (collective == ALLTOALL && send_bytes != recv_bytes) return passed(collective, SIGNATURE);
    const entry *e = collective == ALLTOALLV ? learnv_entry(c) : NULL; /* learned by the class the ranks agree */
    if (e)
        return learnedv_call(c, e, call->send, call->recv, call->blocks, &call->result, &call->timing,
                             &call->schedule, &call->failure);
    e = chosen(c, collective, send_bytes, &why);
    if (!e) return passed(collective, why);
    if (e->learn)
        return learned_call(c, e, call->send, call->recv, send_bytes, &call->result, &call->timing, &call->schedule,
                            &call->failure);
    a2ax_plan *plan = bound(c, e->schedule, call->send, call->recv, (MPI_Aint)send_bytes, call->blocks);
    if (!plan) return passed(collective, PREPARE);
    call->result = a2ax_run(plan);
    call->failure = a2ax_failed(plan);
    call->schedule = e->schedule;
    counted(&the.served[collective * the.deploy->nschedules + e->schedule]);
    return 1;
}

/* the call counted; 1 where liba2a does nothing else with it (no deploy file, no recording): the caller passes it
   on at once, with nothing to build */
static int only_counted(int collective) {
    counted(&the.seen[collective]);
    return liba2a_runs() ? 0 : (passed(collective, NO_FILE), 1);
}

/* the call served (1, its result in call->result), else 0: the caller runs the library's own, then ends() */
static int serves(blocking_call *call) {
    call->schedule = -1;
    call->start = the.recording ? PMPI_Wtime() : 0.0;
    int done = served(call, call->send_count * plain_size(call->send_type),
                      call->recv_count * plain_size(call->recv_type));
    call->library_start = call->timing ? PMPI_Wtime() : 0.0;
    return done;
}

/* after the call ran (served or the library's): the learner's visit timed, the call recorded; its result, a served
   exchange's error handed to the program as MPI would hand it (handed_to_program) */
static int ends(blocking_call *call) {
    if (call->timing) /* the library's visit, for its collective's learner */
        (call->collective == ALLTOALLV ? visitedv : visited)(call->timing, call->timing->arm,
                                                             PMPI_Wtime() - call->library_start);
    if (call->schedule >= 0 && call->result != MPI_SUCCESS) {
        call->result = handed_to_program(call->comm, call->result, call->name, the.deploy->names[call->schedule],
                                         call->failure.call);
        /* its private copy may hold a message of the failed exchange that no receive took: the next call makes
           another (every rank that met the error, alike), and the old one's messages are never matched */
        A2AX_CHECKED(NULL, PMPI_Comm_delete_attr(call->comm, the.keyval));
    }
    if (!the.recording) return call->result;
    if (call->collective == ALLTOALL) /* in place, the send arguments mean nothing */
        recorded(call->comm, ALLTOALL, call->send == MPI_IN_PLACE ? call->recv_type : call->send_type,
                 call->recv_type, call->send == MPI_IN_PLACE ? call->recv_count : call->send_count, NULL,
                 PMPI_Wtime() - call->start);
    else if (call->send != MPI_IN_PLACE) /* a row lacking on one rank is agreed on inside */
        recorded(call->comm, ALLTOALLV, call->send_type, call->recv_type, 0, call->row, PMPI_Wtime() - call->start);
    return call->result;
}

/* element i of counts or displacements held as `kind` */
static inline MPI_Count element(const void *array, enum number_kind kind, int i) {
    if (kind == INTS) return ((const int *)array)[i];
    return kind == AINTS ? (MPI_Count)((const MPI_Aint *)array)[i] : ((const MPI_Count *)array)[i];
}

MPI_Aint *alltoallv_blocks(MPI_Comm comm, const void *sc, const void *sd, MPI_Datatype st, const void *rc,
                           const void *rd, MPI_Datatype rt, enum number_kind counts, enum number_kind displs,
                           long long **row) {
    int n, inter;
    *row = NULL;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
        return NULL; /* the library will say what is wrong with it */
    MPI_Count ss = plain_size(st), rs = plain_size(rt);
    MPI_Aint *b = malloc(sizeof(MPI_Aint) * 4 * (size_t)n);
    *row = malloc(sizeof(long long) * (size_t)n);
    if (!b || !*row) { /* neither: the call passes through, unrecorded */
        free(b), free(*row);
        *row = NULL;
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        MPI_Count count = element(sc, counts, i);
        b[i] = (MPI_Aint)(element(sd, displs, i) * ss), b[n + i] = (MPI_Aint)(count * ss);
        b[2 * n + i] = (MPI_Aint)(element(rd, displs, i) * rs);
        b[3 * n + i] = (MPI_Aint)(element(rc, counts, i) * rs);
        (*row)[i] = count;
    }
    return b;
}

/* an alltoallv's call with its blocks and row (freed by alltoallv_ended) where liba2a runs */
static blocking_call alltoallv_call(const char *name, const void *sb, const void *sc, const void *sd, MPI_Datatype st,
                                    void *rb, const void *rc, const void *rd, MPI_Datatype rt, MPI_Comm comm,
                                    enum number_kind counts, enum number_kind displs) {
    blocking_call call = {.name = name, .collective = ALLTOALLV, .send = sb, .recv = rb, .send_type = st,
                          .recv_type = rt, .comm = comm};
    long long *row = NULL;
    if (sb != MPI_IN_PLACE)
        call.blocks = alltoallv_blocks(comm, sc, sd, st, rc, rd, rt, counts, displs, &row);
    call.row = row;
    return call;
}

static int alltoallv_ended(blocking_call *call) {
    int result = ends(call);
    free((void *)call->blocks);
    free((void *)call->row);
    return result;
}

/* the next MPI_Alltoall(v) after liba2a's (next_mpi): what a call liba2a does not serve goes to; else PMPI_X, called
   (never its address taken: that binds at load, before mpi4py has loaded libmpi into a Python program) */
typedef int alltoall_fn(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int alltoallv_fn(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *,
                         MPI_Datatype, MPI_Comm);
#if MPI_VERSION >= 4
typedef int alltoall_c_fn(const void *, MPI_Count, MPI_Datatype, void *, MPI_Count, MPI_Datatype, MPI_Comm);
typedef int alltoallv_c_fn(const void *, const MPI_Count *, const MPI_Aint *, MPI_Datatype, void *, const MPI_Count *,
                           const MPI_Aint *, MPI_Datatype, MPI_Comm);
#endif

static blocking_call alltoall_call(const char *name, const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                                   MPI_Count rc, MPI_Datatype rt, MPI_Comm comm) {
    return (blocking_call){.name = name, .collective = ALLTOALL, .send = sb, .recv = rb, .send_count = sc,
                           .recv_count = rc, .send_type = st, .recv_type = rt, .comm = comm};
}

EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm) {
    static void *next;
    alltoall_fn *library = next_mpi("MPI_Alltoall", &next);
    if (only_counted(ALLTOALL))
        return library ? library(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
                      : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    blocking_call call = alltoall_call("MPI_Alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                       comm);
    if (!serves(&call))
        call.result = library ? library(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
                              : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return ends(&call);
}

EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                         void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                         MPI_Comm comm) {
    static void *next;
    alltoallv_fn *library = next_mpi("MPI_Alltoallv", &next);
    if (only_counted(ALLTOALLV))
        return library ? library(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm)
                      : PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                       recvtype, comm);
    blocking_call call = alltoallv_call("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                        rdispls, recvtype, comm, INTS, INTS);
    if (!serves(&call))
        call.result = library ? library(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                        comm)
                              : PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                               recvtype, comm);
    return alltoallv_ended(&call);
}

#if MPI_VERSION >= 4
EXPORT int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                          MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    static void *next;
    alltoall_c_fn *library = next_mpi("MPI_Alltoall_c", &next);
    if (only_counted(ALLTOALL))
        return library ? library(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
                      : PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    blocking_call call = alltoall_call("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                       comm);
    if (!serves(&call))
        call.result = library ? library(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
                              : PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return ends(&call);
}

EXPORT int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                           MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[],
                           const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    static void *next;
    alltoallv_c_fn *library = next_mpi("MPI_Alltoallv_c", &next);
    if (only_counted(ALLTOALLV))
        return library ? library(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm)
                      : PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                         recvtype, comm);
    blocking_call call = alltoallv_call("MPI_Alltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                        recvcounts, rdispls, recvtype, comm, COUNTS, AINTS);
    if (!serves(&call))
        call.result = library ? library(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                        comm)
                              : PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                                 recvtype, comm);
    return alltoallv_ended(&call);
}
#endif
