/* liba2a's non-blocking and persistent forms: the private copies of communicators and the plans they run.
 *
 * Where the executor progresses inside MPI (A2AX_MPI_PROGRESS: MPICH's progress engine polls each exchange in flight),
 * a call the deploy file covers is served as a blocking one is: MPI_Ialltoall(v) returns a generalized request that the
 * exchange completes (MPI_Grequest_complete, from MPICH's progress: any MPI call of the rank, or its progress thread);
 * MPI_Alltoall_init returns a persistent zero-byte receive from this rank on a private self-communicator, which
 * MPI_Start posts as it starts the exchange and the exchange's end completes with a zero-byte send (a one-byte one, an
 * error, where it failed). So the program's MPI_Wait, MPI_Test and their kin work as with the library's own requests
 * (and return a failed exchange's error); only MPI_Start(all) and MPI_Request_free are intercepted beside the calls.
 *
 * Each communicator gets its own private copy for these calls, made without blocking: its first non-blocking or
 * persistent all-to-all starts MPI_Comm_idup and passes through; the next waits for that copy, which every rank
 * started at its own first call, and is served. Node layouts are not asked for (that would block): a schedule for a
 * node layout serves these calls only where a blocking all-to-all on the communicator came first and found the layout.
 * A learn line's size class serves them with what its blocking calls chose, once they chose (learned_choice: the
 * exploring and revisits stay in the blocking calls; a persistent request keeps what was chosen when it was made).
 * Elsewhere (Open MPI) they pass through, counted. */

#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <stdlib.h>

#ifdef A2AX_MPI_PROGRESS
nonblocking_t nb = {MPI_KEYVAL_INVALID, 0, 0, MPI_COMM_NULL, NULL, NULL, 1, 1};

void release(nb_state *s) {
    free_plans(&s->c);
    if (s->c.own != MPI_COMM_NULL) A2AX_CHECKED(NULL, PMPI_Comm_free(&s->c.own));
    free(s->c.candidates);
    s->c.candidates = NULL;
    s->c.ncandidates = 0;
}

/* the private copy's MPI_Comm_idup waited for (every rank started it at its first call), its errors then returned to
   liba2a (MPI_ERRORS_RETURN); one that failed leaves the communicator's calls to the library (s->broken) */
static void made(nb_state *s) {
    if (s->making == MPI_REQUEST_NULL) return;
    s->broken = PMPI_Wait(&s->making, MPI_STATUS_IGNORE) != MPI_SUCCESS || s->c.own == MPI_COMM_NULL ||
                PMPI_Comm_set_errhandler(s->c.own, MPI_ERRORS_RETURN) != MPI_SUCCESS;
    s->making = MPI_REQUEST_NULL;
}

/* the program freed the communicator: its plans (an exchange in flight completes first) and private copy, unless
   persistent requests still run on them */
static int forget_nonblocking(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    nb_state *s = value;
    made(s);
    s->orphan = 1;
    if (!s->persistents) release(s);
    return MPI_SUCCESS;
}

/* what every communicator's non-blocking calls share, made once (under the.lock: threads may meet it together):
   0, else 1 (then these calls pass through) */
static int nonblocking_ready(void) {
    if (__atomic_load_n(&nb.ready, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&the.lock);
    int *bound, has = 0, bad = nb.ready == 0 &&
        (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget_nonblocking, &nb.keyval, NULL) != MPI_SUCCESS ||
         PMPI_Comm_dup(MPI_COMM_SELF, &nb.self) != MPI_SUCCESS || /* one rank: local */
         PMPI_Comm_set_errhandler(nb.self, MPI_ERRORS_RETURN) != MPI_SUCCESS || /* the truncation: the wait's result */
         PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound, &has) != MPI_SUCCESS);
    if (!nb.ready && !bad) {
        for (int i = 0; i < the.deploy->nschedules; i++) {
            long tags = a2ax_tags(the.deploy->schedules[i]);
            nb.tag_stride = tags > nb.tag_stride ? tags : nb.tag_stride;
        }
        nb.tag_slots = ((has ? *bound : 32767) + 1L) / nb.tag_stride;
        nb.tag_slots = nb.tag_slots < 1 ? 1 : nb.tag_slots > TAG_SLOTS ? TAG_SLOTS : nb.tag_slots;
        __atomic_store_n(&nb.ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&the.lock);
    return bad;
}

/* the state of comm for these calls, or NULL at its first one (then its private copy is started) and where its copy
   could not be made */
static nb_state *nonblocking_state(MPI_Comm comm) {
    nb_state *s;
    comm_state *blocking;
    int found, laid_found;
    if (nonblocking_ready() || PMPI_Comm_get_attr(comm, nb.keyval, &s, &found) != MPI_SUCCESS) return NULL;
    if (found) {
        made(s);
        return s->broken ? NULL : s;
    }
    if (!(s = calloc(1, sizeof *s))) return NULL;
    comm_state *c = &s->c;
    *c = (comm_state){.comm = comm, .own = MPI_COMM_NULL, .id = -1};
    s->making = MPI_REQUEST_NULL;
    s->broken = PMPI_Comm_size(comm, &c->size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &c->rank) != MPI_SUCCESS ||
                PMPI_Comm_get_attr(comm, the.keyval, &blocking, &laid_found) != MPI_SUCCESS ||
                !(c->candidates = calloc((size_t)the.deploy->nentries + 1, sizeof *c->candidates));
    for (int i = 0; !s->broken && i < the.deploy->nentries; i++) { /* its node layout, if a blocking call found it */
        const entry *e = &the.deploy->entries[i];
        int laid = 0;
        for (int j = 0; laid_found && e->layout && j < blocking->ncandidates; j++) laid |= blocking->candidates[j] == e;
        if (e->nprocs == c->size && (!e->layout || laid)) c->candidates[c->ncandidates++] = e;
    }
    if (!s->broken && PMPI_Comm_idup(comm, &c->own, &s->making) != MPI_SUCCESS)
        s->broken = 1, c->own = MPI_COMM_NULL, s->making = MPI_REQUEST_NULL;
    pthread_mutex_lock(&the.lock);
    s->next = nb.states;
    nb.states = s;
    pthread_mutex_unlock(&the.lock);
    A2AX_CHECKED(NULL, PMPI_Comm_set_attr(comm, nb.keyval, s)); /* where it fails, its calls pass through */
    return NULL;
}

/* the schedule that the blocking calls of learn entry e's size class of `bytes` chose on comm, else -1 (why in *why:
   no choice yet, or the library's own under another name). Read from the program communicator's learners (not the
   private copy's state: they live where the blocking calls learn), found without a collective (its attribute). A
   learner's state changes only at a block's end, agreed inside a blocking call on comm; MPI has every rank make its
   collectives on comm in one order, so every rank reads the same state here and runs the same schedule.
   MPI_Alltoall's classes are keyed by bytes per peer (MPI_Alltoallv's: learned_choice_v). */
static int learned_choice(MPI_Comm comm, const entry *e, MPI_Count bytes, int *why) {
    comm_state *c;
    int found;
    *why = LEARNING_NO_CHOICE;
    if (PMPI_Comm_get_attr(comm, the.keyval, &c, &found) != MPI_SUCCESS || !found) return -1;
    for (const learning *g = c->learnings; g; g = g->next)
        if (g->e == e && bytes >= g->low && bytes <= g->high) {
            if (g->l.state != LEARN_CHOSEN || g->l.choice <= 0) return -1;
            int k = e->candidates[g->l.choice - 1];
            if (k < 0) *why = LEARNING; /* `control`: the library's own under another name */
            return k;
        }
    return -1;
}

/* learned_choice's MPI_Alltoallv form: what the learner of the class the blocking calls on comm agreed last chose
   (liba2a_learnv.c: no rank knows a call's class alone, and the ranks agree it only at a block's end or a probe,
   inside a blocking call). Every rank runs the same arm; where the call's own class is another, a slower arm at worst,
   as for the blocking calls between two agreements. */
static int learned_choice_v(MPI_Comm comm, const entry *e, int *why) {
    comm_state *c;
    int found;
    *why = LEARNING_NO_CHOICE;
    if (PMPI_Comm_get_attr(comm, the.keyval, &c, &found) != MPI_SUCCESS || !found) return -1;
    const learning *g = c->v.at;
    if (!g || g->e != e || g->l.state != LEARN_CHOSEN || g->l.choice <= 0) return -1;
    int k = e->candidates[g->l.choice - 1];
    if (k < 0) *why = LEARNING;
    return k;
}

/* the plan a non-blocking or persistent call of the file's entry runs on comm (NULL: pass the call through, why in
   *why; else the schedule's name in *schedule): checked as a blocking call is, on the communicator's private copy
   for these calls */
a2ax_plan *planned_nonblocking(int collective, const void *send, void *recv, MPI_Count send_bytes,
                               MPI_Count recv_bytes, MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks,
                               MPI_Comm comm, int own_plan, int *transient, nb_state **state, int *why,
                               const char **schedule) {
    int inter;
    *why = NO_FILE;
    if (!the.deploy) return NULL;
    *why = collective == ALLTOALL && own_plan ? PERSISTENT : NONBLOCKING;
    if (a2ax_progress_mode() != A2AX_BY_MPI) return NULL; /* A2A_EXECUTOR_PROGRESS chose another way: not MPI's */
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) inter = 1; /* not one it can use: the library's */
    *why = inter ? INTERCOMM : send == MPI_IN_PLACE ? IN_PLACE : collective == ALLTOALLV && !blocks ? PREPARE
         : !plain_size(st) || !plain_size(rt) ? DATATYPE : collective == ALLTOALL && send_bytes != recv_bytes ? SIGNATURE
         : -1;
    if (*why >= 0) return NULL;
    *why = EMPTY;
    if (collective == ALLTOALL && send_bytes == 0) return NULL;
    int size, sized = 0, any = 0;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS) size = -1; /* no entry is for it: the library says what is wrong */
    for (int i = 0; i < the.deploy->nentries; i++) {
        any |= the.deploy->entries[i].collective == collective;
        sized |= the.deploy->entries[i].nprocs == size && the.deploy->entries[i].collective == collective;
    }
    *why = any ? NPROCS : COLLECTIVE; /* no private copy made for a size or collective the file lacks */
    if (!sized) return NULL;
    nb_state *s = *state = nonblocking_state(comm);
    *why = PRIVATE_COPY;
    if (!s) return NULL;
    const entry *e = collective == ALLTOALLV ? learnv_entry(&s->c) : NULL, *v = e; /* by the class agreed last */
    if (!e) e = chosen(&s->c, collective, send_bytes, why);
    int k = !e ? -1 : v ? learned_choice_v(comm, e, why) : e->learn ? learned_choice(comm, e, send_bytes, why)
                                                           : e->schedule;
    if (k < 0) return NULL;
    *transient = own_plan;
    a2ax_plan *plan = own_plan ? NULL : bound(&s->c, k, send, recv, (MPI_Aint)send_bytes, blocks);
    if (!plan) { /* a persistent request's own, or every kept plan has an exchange in flight: one for this call */
        *transient = 1;
        plan = prepared(&s->c, k, send, recv, (MPI_Aint)send_bytes, blocks);
    }
    *why = PREPARE;
    if (plan) counted(&the.served[collective * the.deploy->nschedules + k]);
    *schedule = the.deploy->names[k];
    return plan;
}

/* an idle plan about to start on s's private copy takes the next slot of tags: a communicator's collectives start in
   the same order on every rank, so each exchange gets the same slot everywhere, and exchanges in flight together on
   one communicator (two MPI_Ialltoall, then MPI_Waitall) never match each other's messages */
void next_tags(nb_state *s, a2ax_plan *plan) {
    a2ax_tag_from(plan, (int)((long)(s->starts++ % (unsigned long)nb.tag_slots) * nb.tag_stride));
}

/* at MPI_Finalize (one thread): every persistent request's plan and every private copy freed */
void nonblocking_finalized(void) {
    while (nb.persistents) persistent_freed(nb.persistents);
    for (nb_state *s = nb.states; s; s = s->next)
        if (!s->orphan) A2AX_CHECKED(NULL, PMPI_Comm_delete_attr(s->c.comm, nb.keyval));
    while (nb.states) {
        nb_state *s = nb.states;
        nb.states = s->next;
        free(s);
    }
    if (nb.ready) {
        A2AX_CHECKED(NULL, PMPI_Comm_free_keyval(&nb.keyval));
        A2AX_CHECKED(NULL, PMPI_Comm_free(&nb.self));
    }
    nb.ready = 0;
}

#else
void nonblocking_finalized(void) {}
#endif
