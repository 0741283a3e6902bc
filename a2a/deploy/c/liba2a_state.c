/* liba2a's communicators: what the file serves on each, its private copy and prepared plans, what it exchanged */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <stdlib.h>
#include <string.h>

liba2a_state the = {.lock = PTHREAD_MUTEX_INITIALIZER};
const char *const collective_name[COLLECTIVES] = {"alltoall", "alltoallv"};
const char *const reason_text[REASONS] = {
    "no deploy file", "nothing to move (0 bytes)", "intercommunicator", "MPI_IN_PLACE",
    "derived or non-contiguous datatype",
    "send and receive sizes differ", "the file has no entry for this collective", "communicator size not in the file",
    "node layout not in the file", "size not in the file", "the file keeps the library's choice",
    "the executor could not prepare it", "non-blocking form (the executor has no progress hook here)",
    "persistent form (the executor has no progress hook here)",
    "first non-blocking call on the communicator (its private copy is being made)",
    "learning: the library's own (its turn, or held)", "learning: a non-blocking or persistent call whose class has no choice yet"};

void free_plans(comm_state *c) {
    for (int i = 0; i < SLOTS; i++) {
        a2ax_free(c->slots[i].plan);
        free(c->slots[i].blocks);
        c->slots[i] = (slot_t){0};
    }
}

int forget(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    comm_state *c = value;
    rounds_kept(c); /* MPI_Comm_free is collective: its rounds are agreed now, while its private copy lives */
    free_plans(c);
    if (c->own != MPI_COMM_NULL) A2AX_CHECKED(NULL, PMPI_Comm_free(&c->own));
    free(c->candidates);
    c->candidates = NULL;
    c->ncandidates = 0;
    c->freed = 1; /* what it recorded stays until MPI_Finalize writes it */
    return MPI_SUCCESS;
}

/* each rank's node, numbered in order of the nodes' lowest ranks (collective on c->own) */
int *layout_of(comm_state *c) {
    MPI_Comm local;
    int lowest, *node = malloc(sizeof(int) * (size_t)c->size), *first = malloc(sizeof(int) * (size_t)c->size);
    int ok = node && first, all = 0;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->own) != MPI_SUCCESS || !all ||
        PMPI_Comm_split_type(c->own, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local) != MPI_SUCCESS) {
        free(node), free(first);
        return NULL;
    }
    ok = PMPI_Allreduce(&c->rank, &lowest, 1, MPI_INT, MPI_MIN, local) == MPI_SUCCESS;
    ok = PMPI_Comm_free(&local) == MPI_SUCCESS && ok;
    if (!ok || PMPI_Allgather(&lowest, 1, MPI_INT, first, 1, MPI_INT, c->own) != MPI_SUCCESS) {
        free(node), free(first);
        return NULL;
    }
    int nodes = 0;
    for (int r = 0; r < c->size; r++) node[r] = first[r] == r ? nodes++ : node[first[r]];
    free(first);
    return node;
}

/* c's private copy of comm's group (not MPI_Comm_dup: the program's attributes stay its own), whose errors come back
   to liba2a as codes (MPI_ERRORS_RETURN): it hands them to the program through comm's own handler; 0, else 1 */
static int private_copy(MPI_Comm comm, comm_state *c) {
    MPI_Group group;
    if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS) return 1;
    int bad = PMPI_Comm_create(comm, group, &c->own) != MPI_SUCCESS || c->own == MPI_COMM_NULL;
    bad |= PMPI_Group_free(&group) != MPI_SUCCESS;
    if (!bad) bad = PMPI_Comm_set_errhandler(c->own, MPI_ERRORS_RETURN) != MPI_SUCCESS;
    if (bad && c->own != MPI_COMM_NULL) A2AX_CHECKED(NULL, PMPI_Comm_free(&c->own));
    return bad;
}

/* the state of a communicator, made at its first all-to-all (collective: every rank makes the same choices), or NULL
   where it could not be made (on every rank alike: memory, or an MPI call that failed). Threads making the states of
   different communicators at once each run their own collectives; the process-wide list is taken under the.lock. */
comm_state *state_of(MPI_Comm comm) {
    comm_state *c;
    int found, size, sized = 0, laid = 0;
    if (PMPI_Comm_get_attr(comm, the.keyval, &c, &found) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return NULL;
    if (found) return c;
    for (int i = 0; the.deploy && i < the.deploy->nentries; i++)
        if (the.deploy->entries[i].nprocs == size) sized++, laid += the.deploy->entries[i].layout != NULL;
    c = calloc(1, sizeof *c);
    const entry **candidates = calloc((size_t)sized + 1, sizeof *candidates);
    int ok = c && candidates, all = ok;
    if (sized || the.recording) { /* nothing collective happens on it otherwise */
        if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    }
    if (!all) {
        free(c), free(candidates);
        return NULL;
    }
    c->comm = comm;
    c->own = MPI_COMM_NULL;
    c->size = size;
    c->candidates = candidates;
    if (PMPI_Comm_rank(comm, &c->rank) != MPI_SUCCESS || ((sized || the.recording) && private_copy(comm, c))) {
        free(c), free(candidates);
        return NULL;
    }
    int *layout = laid ? layout_of(c) : NULL; /* NULL where it could not be found: no entry for a layout serves */
    for (int i = 0; sized && i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        if (e->nprocs == c->size &&
            (!e->layout || (layout && memcmp(e->layout, layout, sizeof(int) * (size_t)c->size) == 0)))
            c->candidates[c->ncandidates++] = e;
    }
    free(layout);
    pthread_mutex_lock(&the.lock);
    c->id = the.ncomms++;
    c->next = the.states;
    the.states = c;
    pthread_mutex_unlock(&the.lock);
    A2AX_CHECKED(NULL, PMPI_Comm_set_attr(comm, the.keyval, c)); /* where it fails, the next call makes another */
    return c;
}

/* the entry serving `bytes` of a collective on c, or why none */
const entry *chosen(const comm_state *c, int collective, long long bytes, int *why) {
    int sized = 0;
    for (int i = 0; i < c->ncandidates; i++) {
        const entry *e = c->candidates[i];
        if (e->collective != collective) continue;
        sized = 1;
        if (bytes >= e->low && (e->high < 0 || bytes <= e->high)) {
            *why = LIBRARY;
            return e->schedule >= 0 || e->learn ? e : NULL;
        }
    }
    int any_size = 0, any = 0;
    for (int i = 0; !sized && the.deploy && i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        any |= e->collective == collective;
        any_size |= e->nprocs == c->size && e->collective == collective;
    }
    *why = sized ? SIZE : any_size ? LAYOUT : any ? NPROCS : COLLECTIVE;
    return NULL;
}

/* a plan of schedule k on c's private communicator bound to these buffers (local, no collective), or NULL */
a2ax_plan *prepared(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks) {
    char error[512];
    a2ax_plan *plan = NULL;
    const a2ax_schedule *schedule = the.deploy->schedules[k];
    int bad;
    if (blocks) {
        int n = c->size;
        bad = a2ax_bind(schedule, c->own, send, blocks, blocks + n, recv, blocks + 2 * n, blocks + 3 * n, -1, &plan,
                        error, sizeof error);
    } else {
        MPI_Aint *at = malloc(sizeof(MPI_Aint) * 2 * (size_t)c->size);
        for (int i = 0; at && i < c->size; i++) at[i] = i * block, at[c->size + i] = block;
        bad = !at || a2ax_bind(schedule, c->own, send, at, at + c->size, recv, at, at + c->size, block, &plan, error,
                               sizeof error);
        free(at);
    }
    return bad ? NULL : plan;
}

/* a plan of schedule k bound to these buffers: kept from an earlier call, else prepared; a plan with an exchange in
   flight (a non-blocking call's) is neither reused nor replaced: NULL when every slot holds one */
a2ax_plan *bound(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks) {
    size_t bytes = 4 * sizeof(MPI_Aint) * (size_t)c->size;
    slot_t *oldest = NULL;
    for (int i = 0; i < SLOTS; i++) {
        slot_t *s = &c->slots[i];
        if (s->plan && a2ax_busy(s->plan)) continue;
        if (s->plan && s->schedule == k && s->send == send && s->recv == recv && s->block == block &&
            (blocks ? s->blocks && memcmp(s->blocks, blocks, bytes) == 0 : !s->blocks)) {
            s->used = ++c->clock;
            return s->plan;
        }
        if (!oldest || s->used < oldest->used) oldest = s;
    }
    if (!oldest) return NULL;
    a2ax_free(oldest->plan);
    free(oldest->blocks);
    *oldest = (slot_t){0};
    a2ax_plan *plan = prepared(c, k, send, recv, block, blocks);
    if (!plan) return NULL;
    *oldest = (slot_t){plan, k, send, recv, block, NULL, ++c->clock};
    if (blocks && (oldest->blocks = malloc(bytes)) != NULL) memcpy(oldest->blocks, blocks, bytes);
    if (blocks && !oldest->blocks) {
        a2ax_free(plan);
        *oldest = (slot_t){0};
        return NULL;
    }
    return plan;
}

/* a predefined datatype whose bytes lie contiguous: its size, else 0 (the last few answers kept: a predefined
   type is never freed, so its handle always means the same type) */
MPI_Count plain_size(MPI_Datatype type) {
    if (type == MPI_DATATYPE_NULL) return 0; /* an in-place call's send type may be null: nothing to ask of it */
    /* each thread's own (no lock on every call), in the static TLS block: liba2a is preloaded, loaded at start */
    static _Thread_local __attribute__((tls_model("initial-exec"))) struct {
        named_type types[NAMED];
        unsigned next;
    } kept;
    named_type *named = kept.types;
    for (int i = 0; i < NAMED; i++)
        if (named[i].size && named[i].type == type) return named[i].size;
    int integers, addresses, types, combiner;
    MPI_Count size, lb, extent;
    if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS ||
        combiner != MPI_COMBINER_NAMED || PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS)
        return 0; /* not known to be plain: the call passes through */
    size = lb == 0 && extent == size ? size : 0;
    named[kept.next++ % NAMED] = (named_type){type, size};
    return size;
}

int passed(int collective, int reason) {
    counted(&the.passed[collective][reason]);
    return 0;
}
