/* liba2a's learning of MPI_Alltoallv (`learn alltoallv` lines, docs/learn.md "Alltoallv learned").
 *
 * A rank knows its own send row and receive column, not the call's size: no rank can put a call in a size class
 * alone. The class of an alltoallv is the largest block any rank sends one peer in it, in bytes, and its power of two
 * (64-127 B, ...) within the learn line's LOW..HIGH; the ranks agree on it without a collective of its own:
 *   - each visit of a block keeps this rank's largest block beside its time, and the block's one MPI_Allreduce (the
 *     maximum) agrees both (and the communicator's ordinal, as for MPI_Alltoall's classes: liba2a_learn.c): every
 *     rank then knows the class of every visit;
 *   - a round whose visits were calls of different classes, or of another class than the learner's, is set aside
 *     (not evidence);
 *   - the class of the block's last visit is the communicator's class from then on: its next calls go to that
 *     class's learner (made, or taken from the file's learned line, at that point on every rank alike);
 *   - where PROBE calls passed since the last agreement outside a block (none agreed yet, a class out of the range,
 *     kept or undecided, a choice between revisits, exploring paced), a probe of its own (one MPI_Allreduce of one
 *     number) agrees the class of that call.
 * The completed rounds of a block in progress when the run ends (or its communicator is freed) are agreed the same
 * way (packedv, judgedv: liba2a_learn.c's rounds_kept_at_end) and kept.
 * The arm of a call is the agreed class's learner's, whose state changes only at agreed points: every rank runs the
 * same arm at every call. A program whose sizes change between two agreements runs the arm of the class agreed last
 * for at most PROBE calls (a block's, where one is in progress): a slower arm for a while at worst, never a wrong
 * answer. */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <limits.h>
#include <math.h>
#include <string.h>

#define PROBE 128     /* calls after an agreement, outside a block, at which a probe agrees the class again */
#define FAILED 1e300  /* a failed visit's largest block: its round is set aside on every rank (the maximum) */

const entry *learnv_entry(const comm_state *c) {
    for (int i = 0; i < c->ncandidates; i++)
        if (c->candidates[i]->collective == ALLTOALLV) return c->candidates[i]->learn ? c->candidates[i] : NULL;
    return NULL;
}

/* the power of two at or below `bytes` (0 for 0): a class's key */
static long long power_below(long long bytes) {
    long long low = 1;
    if (bytes < 1) return 0;
    while (low <= bytes / 2) low *= 2;
    return low;
}

/* the learner of the class of a call whose largest block is `bytes`, found or made (learning_at: from the store's
   evidence or the file's learned line where there is one); NULL where the class lies outside e's range or there is no
   memory (the library's serves) */
static learning *class_of(comm_state *c, const entry *e, double largest) {
    if (!(largest >= 1 && largest <= (double)(LLONG_MAX / 2))) return NULL; /* FAILED, or nothing to move */
    long long bytes = (long long)largest, low = power_below(bytes), high = 2 * low - 1;
    if (bytes < e->low || (e->high >= 0 && bytes > e->high)) return NULL;
    low = low > e->low ? low : e->low, high = e->high >= 0 && e->high < high ? e->high : high;
    return learning_at(c, e, low, high, 0x5eedf000ULL + (unsigned long long)low * 37 + (unsigned long long)c->size);
}

/* whether the class is agreed at this call by a probe: the first call, and PROBE calls after an agreement where no
   block is in progress (a block's rounds are one class's: it ends with its own agreement) */
static int probing(const learnedv_t *v) {
    return (!v->at || !v->at->l.in_block) && v->since % PROBE == 0;
}

/* a probe: the largest block of any rank in this call agreed, and its class's learner made the communicator's */
static void probe(comm_state *c, const entry *e, double largest) {
    learnedv_t *v = &c->v;
    if (PMPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_DOUBLE, MPI_MAX, c->own) != MPI_SUCCESS) {
        v->at = NULL, v->since = 1; /* MPI said why; the library's serves, and the next probe tries again */
        return;
    }
    v->at = class_of(c, e, largest), v->since = 0, v->agreements++, v->probes++;
}

int learnedv_call(comm_state *c, const entry *e, const void *send, void *recv, const MPI_Aint *blocks, int *result,
                  learning **timing, int *schedule, a2ax_error *failure) {
    learnedv_t *v = &c->v;
    double largest = 0;
    for (int i = 0; i < c->size; i++) largest = (double)blocks[c->size + i] > largest ? (double)blocks[c->size + i]
                                                                                     : largest;
    if (probing(v)) probe(c, e, largest);
    v->since++;
    learning *g = v->at;
    if (!g) return passed(ALLTOALLV, SIZE);
    int timed, arm = learn_next(&g->l, &timed), k = arm ? e->candidates[arm - 1] : -1;
    v->largest = largest;
    if (k < 0) {
        if (timed) *timing = g, g->arm = arm;
        return passed(ALLTOALLV, LEARNING);
    }
    double start = PMPI_Wtime(); /* its plan bound inside its time, as the library's whole call is in its own */
    a2ax_plan *plan = bound(c, k, send, recv, 0, blocks);
    if (!plan) { /* out of memory: the library's runs here in its place, timed for the arm, as in learned_call */
        if (timed) *timing = g, g->arm = arm;
        return passed(ALLTOALLV, PREPARE);
    }
    *result = a2ax_run(plan);
    double seconds = PMPI_Wtime() - start;
    *schedule = k, *failure = a2ax_failed(plan);
    counted(&the.served[ALLTOALLV * the.deploy->nschedules + k]);
    if (timed) {
        if (*result != MPI_SUCCESS) v->largest = FAILED; /* a failed exchange's time is no visit's */
        visitedv(g, arm, seconds);
    }
    return 1;
}

/* the agreed block's completed rounds of another class than g's, or of mixed classes, set aside: the rest moved to
   the front and counted as the block's completed rounds (learn_decide judges l->round of them: a whole block's, or
   the completed rounds of a block the run ends inside), and counted in g->own as the values this run adds to the
   series (the learned file's and the store's) */
static void set_aside(learning *g, learnedv_t *v) {
    learner *l = &g->l;
    int kept = 0, completed = l->round < l->rounds ? l->round : l->rounds;
    for (int r = 0; r < completed; r++) {
        int alike = 1;
        for (int a = 0; a < l->narms; a++)
            alike &= !(l->times[r][a] > 0) || (v->bytes[r][a] >= (double)g->low && v->bytes[r][a] <= (double)g->high);
        if (!alike) {
            v->aside++;
            continue;
        }
        if (kept != r) memcpy(l->times[kept], l->times[r], sizeof l->times[r]);
        kept++;
    }
    for (int r = kept; r < l->rounds; r++) memset(l->times[r], 0, sizeof l->times[r]);
    l->round = kept;
    int exploring = l->state == LEARN_EXPLORING || l->state == LEARN_GIVEN_BACK;
    for (int r = 0; r < kept; r++)
        for (int a = 0; a < l->narms; a++) g->own[a] += !a || (exploring && l->times[r][a] > 0);
}

void packedv(learning *g, double *agreed) {
    int n;
    const double *times = learn_times(&g->l, &n);
    memcpy(agreed, times, sizeof(double) * (size_t)n);
    memcpy(agreed + n, &g->c->v.bytes[0][0], sizeof(double) * (size_t)n);
    agreed[2 * n] = g->ordinal; /* the largest of any rank's: the share every rank takes (as liba2a_learn.c's) */
}

void judgedv(learning *g, const double *agreed, int ok) {
    learnedv_t *v = &g->c->v;
    learner *l = &g->l;
    int n;
    double *times = learn_times(l, &n);
    if (!ok) {
        l->state = LEARN_UNDECIDED, l->gap = LLONG_MAX, l->choice = 0, l->in_block = 0; /* the library's serves */
        v->since = 0; /* a probe at the next call: no block agrees the class now */
    } else {
        memcpy(times, agreed, sizeof(double) * (size_t)n);
        memcpy(&v->bytes[0][0], agreed + n, sizeof(double) * (size_t)n);
        l->share = ldexp(learn_share_of((int)agreed[2 * n]), -l->givebacks);
        set_aside(g, v);
        learn_decide(l, &the.learn);
    }
    memset(v->bytes, 0, sizeof v->bytes);
}

void visitedv(learning *g, int arm, double seconds) {
    learnedv_t *v = &g->c->v;
    learner *l = &g->l;
    v->bytes[l->round][arm] = v->largest;
    if (!learn_took(l, arm, seconds)) return;
    double agreed[AGREED_V];
    packedv(g, agreed);
    int ok = PMPI_Allreduce(MPI_IN_PLACE, agreed, AGREED_V, MPI_DOUBLE, MPI_MAX, g->c->own) == MPI_SUCCESS;
    /* the block's last visit, as agreed: the class of the calls from here */
    double last = agreed[LEARN_BLOCK * LEARN_ARMS + (l->rounds - 1) * LEARN_ARMS + arm];
    judgedv(g, agreed, ok);
    if (ok) v->at = class_of(g->c, g->e, last), v->since = 1, v->agreements++; /* agreed now: no probe next call */
}
