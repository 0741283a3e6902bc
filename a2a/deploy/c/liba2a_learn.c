/* liba2a's learning: a learn entry's size classes, each a learner (learn.c) over the calls of its communicator, and
   what was learned written back as a deploy file's learned lines (A2A_LEARN_OUT) */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int same_layout(const int *a, const int *b, int nprocs) {
    return a == b || (a && b && memcmp(a, b, sizeof(int) * (size_t)nprocs) == 0);
}

/* a learner's copy, its series its own (0, else 1: out of memory) */
static int copied(learner *to, const learner *from) {
    *to = *from;
    int bad = 0;
    for (int a = 0; a <= LEARN_ARMS; a++) {
        learn_series *s = a < LEARN_ARMS ? &to->ratio[a] : &to->library;
        const learn_series *f = a < LEARN_ARMS ? &from->ratio[a] : &from->library;
        *s = (learn_series){0};
        for (int i = 0; i < f->count; i++) bad |= learn_push(s, f->values[i]);
    }
    return bad;
}

/* the communicators of this rank that learn e's class at `low` already (e serves one size and layout). The k-th to
   learn it takes the share 6 / (pi k)^2 of alpha, the largest k of any of its ranks (agreed with the block's
   times): every rank's communicators of one size together risk at most alpha, however many there are */
static int learners_before(const entry *e, long long low) {
    int found = 0;
    for (const comm_state *c = the.states; c; c = c->next)
        for (const learning *g = c->learnings; g; g = g->next) found += g->e == e && g->low == low;
    return found;
}

/* c's node layout, where the store keeps evidence: another learning's on c, else found (collective on c's private
   copy: every rank makes c's learnings at the same calls); NULL where it cannot be (its evidence is then not kept) */
static int *node_layout(comm_state *c) {
    for (const learning *g = c->learnings; g; g = g->next)
        if (g->layout) {
            int *copy = malloc(sizeof(int) * (size_t)c->size);
            if (copy) memcpy(copy, g->layout, sizeof(int) * (size_t)c->size);
            return copy;
        }
    return layout_of(c);
}

learning *learning_at(comm_state *c, const entry *e, long long low, long long high, unsigned long long seed) {
    for (learning *g = c->learnings; g; g = g->next)
        if (g->e == e && g->low == low) return g;
    learning *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    *g = (learning){.e = e, .low = low, .high = high, .c = c};
    const learner *from = NULL;
    if (the.learn_dir[0] && (g->layout = node_layout(c)) != NULL) /* the store's evidence first, where it has some */
        from = stored_learner(e, g->layout, low);
    g->from = from ? FROM_STORE : FROM_NOTHING;
    for (int i = 0; i < the.deploy->nlearned && !from; i++) {
        const learned_t *m = &the.deploy->learned[i];
        if (m->collective == e->collective && m->nprocs == e->nprocs && m->low == low &&
            same_layout(m->layout, e->layout, e->nprocs) && m->l.narms == 1 + e->ncandidates)
            from = &m->l, g->from = FROM_FILE;
    }
    if (!from || copied(&g->l, from)) {
        learn_free(&g->l); /* a copy cut short by want of memory: begun afresh */
        learn_init(&g->l, e->ncandidates, seed);
        g->from = FROM_NOTHING;
    } else { /* from an earlier run: a choice revisited as if just made, exploring paced from the calls and the
              visits carried (priced before the pacing that learn_resume sets: the exploring of this run is paid from
              the calls of every run, not begun afresh as if nothing had been spent) */
        g->l.begun = 1, g->l.carried[0] = g->l.explored, g->l.carried[1] = g->l.revisited;
        learn_resume(&g->l, &the.learn);
    }
    g->before[0] = g->l.calls, g->before[1] = g->l.explored, g->before[2] = g->l.revisited, g->cost_before = g->l.cost;
    pthread_mutex_lock(&the.lock); /* threads may make the learnings of other communicators at once */
    g->ordinal = 1 + learners_before(e, low);
    learning **last = &c->learnings; /* in the order first met: the report reads as the program ran */
    while (*last) last = &(*last)->next;
    *last = g;
    pthread_mutex_unlock(&the.lock);
    return g;
}

/* the learning of the size class of `bytes` in e's range on c: a power of two to the next, within the range */
static learning *learning_of(comm_state *c, const entry *e, long long bytes) {
    long long low = 1;
    while (low <= bytes / 2) low *= 2;
    long long high = 2 * low - 1;
    low = low > e->low ? low : e->low, high = e->high >= 0 && e->high < high ? e->high : high;
    return learning_at(c, e, low, high, 0x5eed0000ULL + (unsigned long long)low * 31 + (unsigned long long)c->size);
}

#define AGREED (LEARN_BLOCK * LEARN_ARMS + 1) /* what a block's agreement reduces: its times, then an ordinal */

/* a learner's part of an agreement (the maximum over the ranks is taken): its block's times on this rank, then its
   communicator's ordinal (the share every rank then takes: the largest, the least share) */
static void packed(learning *g, double *agreed) {
    int n;
    const double *times = learn_times(&g->l, &n);
    memcpy(agreed, times, sizeof(double) * (size_t)n);
    agreed[n] = g->ordinal;
}

/* the agreed block judged from what every rank now holds alike: the slowest rank's times, the share of the largest
   ordinal. `ok` 0: the agreement failed (MPI said why): the library's own serves the class from here */
static void judged(learning *g, const double *agreed, int ok) {
    learner *l = &g->l;
    if (!ok) {
        l->state = LEARN_UNDECIDED, l->gap = LLONG_MAX, l->choice = 0, l->in_block = 0;
        return;
    }
    int n, rounds = l->round < l->rounds ? l->round : l->rounds, exploring = l->state == LEARN_EXPLORING ||
                                                                             l->state == LEARN_GIVEN_BACK;
    double *times = learn_times(l, &n);
    memcpy(times, agreed, sizeof(double) * (size_t)n);
    l->share = ldexp(learn_share_of((int)agreed[n]), -l->givebacks);
    for (int r = 0; r < rounds; r++) /* the values this run adds to the series (learn_decide's weighing) */
        for (int a = 0; a < l->narms; a++) g->own[a] += !a || (exploring && times[r * LEARN_ARMS + a] > 0);
    learn_decide(l, &the.learn);
}

/* a block's visit took `seconds` on this rank; at the block's end the slowest rank's times are agreed, on the
   communicator's private copy, and the learner decides from them (every rank reaches this at the same call) */
void visited(learning *g, int arm, double seconds) {
    if (!learn_took(&g->l, arm, seconds)) return;
    double agreed[AGREED];
    packed(g, agreed);
    judged(g, agreed, PMPI_Allreduce(MPI_IN_PLACE, agreed, AGREED, MPI_DOUBLE, MPI_MAX, g->c->own) == MPI_SUCCESS);
}

/* whether g's block in progress has completed rounds to agree at the run's end: an alltoallv learning's only where it
   is its communicator's agreed class (whose block the communicator's visits' largest blocks are: c->v; every
   alltoallv block in progress is), alike on every rank of its communicator (the same calls) */
static int rounds_pending(const learning *g) {
    return learn_pending(&g->l) > 0 && (g->e->collective == ALLTOALL || g == g->c->v.at);
}

/* the numbers g's part of an agreement takes: a block's times and an ordinal (alltoallv: each visit's largest block
   too, as at its block's end in liba2a_learnv.c) */
static int agreed_size(const learning *g) {
    return g->e->collective == ALLTOALL ? AGREED : AGREED_V;
}

static void packed_any(learning *g, double *agreed) {
    if (g->e->collective == ALLTOALL) packed(g, agreed);
    else packedv(g, agreed);
}

static void judged_any(learning *g, const double *agreed, int ok) {
    if (g->e->collective == ALLTOALL) judged(g, agreed, ok);
    else judgedv(g, agreed, ok);
}

/* the numbers c's agreement of its pending learnings takes (0: nothing to agree); alike on every rank of c */
static int pending_on(const comm_state *c) {
    int numbers = 0;
    for (const learning *g = c->learnings; g; g = g->next) numbers += rounds_pending(g) ? agreed_size(g) : 0;
    return numbers;
}

/* c's pending learnings packed into `agreed`, in the order of c's learnings (every rank's alike) */
static void packed_on(comm_state *c, double *agreed) {
    int at = 0;
    for (learning *g = c->learnings; g; g = g->next)
        if (rounds_pending(g)) packed_any(g, agreed + at), at += agreed_size(g);
}

/* c's pending learnings judged from its agreement (`agreed`, NULL: none could be made for want of memory on some
   rank: their rounds are dropped, as before) */
static void judged_all(comm_state *c, const double *agreed, int ok) {
    int at = 0;
    for (learning *g = c->learnings; g; g = g->next)
        if (rounds_pending(g)) {
            int size = agreed_size(g);
            if (agreed) judged_any(g, agreed + at, ok);
            else g->l.in_block = 0;
            at += size;
        }
}

void rounds_kept(comm_state *c) {
    int numbers = c->own != MPI_COMM_NULL ? pending_on(c) : 0;
    if (!numbers) return;
    double *agreed = malloc(sizeof(double) * (size_t)numbers);
    int ok = agreed != NULL, all = 0;
    /* one rank without memory: none agrees (the others would wait for it) */
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->own) != MPI_SUCCESS) all = 0;
    if (all) packed_on(c, agreed);
    judged_all(c, all ? agreed : NULL, all && PMPI_Allreduce(MPI_IN_PLACE, agreed, numbers, MPI_DOUBLE, MPI_MAX,
                                                             c->own) == MPI_SUCCESS);
    free(agreed);
}

static const learning *most_calls(int collective, int nprocs, const int *layout, long long low);

int too_few(const learning *g) {
    const learner *l = &g->l;
    int arms = 0;
    for (int a = 0; a < l->narms; a++) arms += l->live[a];
    long long calls = l->calls - g->before[0];
    return (l->state == LEARN_EXPLORING || l->state == LEARN_GIVEN_BACK) && calls > 0 && calls < 2 * arms - 1 ? arms
                                                                                                             : 0;
}

/* where a run's calls of a class are too few for any round, and no report says it on the class's line, one line on
   rank 0 says so where A2A_LEARN_OUT keeps the run: such runs never learn the class, however many there are */
static void say_too_few(void) {
    int rank;
    if (the.report || !the.learn_out[0] || PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != 0) return;
    for (comm_state *c = the.states; c; c = c->next)
        for (const learning *g = c->learnings; g; g = g->next) {
            int arms = too_few(g);
            if (arms && most_calls(g->e->collective, g->e->nprocs, g->e->layout, g->low) == g)
                fprintf(stderr, "a2a: learn %s on %d ranks, %lld-%lld B: a run of %lld calls completes no round of its "
                        "%d arms (%d warm-ups in a run, then a visit of each: %d calls at least), so runs like this "
                        "one never learn it; learn fewer candidates (bench deploy --learn --candidates) or run more "
                        "calls a run\n", collective_name[g->e->collective], c->size, g->low, g->high,
                        g->l.calls - g->before[0], arms, arms - 1, 2 * arms - 1);
        }
}

void rounds_kept_at_end(void) {
    int comms = 0, ok = 1, all = 0, i = 0;
    /* nothing learns: no agreement (alike on every rank: every rank reads the same file, and a file refused anywhere
       is refused everywhere) */
    if (!the.deploy || !learns(the.deploy)) return;
    for (comm_state *c = the.states; c; c = c->next) comms += !c->freed && c->own != MPI_COMM_NULL && pending_on(c);
    double **agreed = calloc((size_t)comms + 1, sizeof *agreed);
    MPI_Request *requests = malloc(sizeof *requests * ((size_t)comms + 1));
    ok = agreed && requests;
    for (comm_state *c = the.states; c && ok; c = c->next)
        if (!c->freed && c->own != MPI_COMM_NULL && pending_on(c))
            ok = (agreed[i++] = malloc(sizeof(double) * (size_t)pending_on(c))) != NULL;
    /* one rank without memory: none posts (a rank that posted would wait for one that did not) */
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all = 0;
    i = 0;
    for (comm_state *c = the.states; c; c = c->next) { /* each communicator's posted, in any order, then waited for */
        if (c->freed || c->own == MPI_COMM_NULL || !pending_on(c)) continue;
        if (all) packed_on(c, agreed[i]);
        if (!all || PMPI_Iallreduce(MPI_IN_PLACE, agreed[i], pending_on(c), MPI_DOUBLE, MPI_MAX, c->own,
                                    &requests[i]) != MPI_SUCCESS)
            if (requests) requests[i] = MPI_REQUEST_NULL;
        i++;
    }
    i = 0;
    for (comm_state *c = the.states; c; c = c->next) {
        if (c->freed || c->own == MPI_COMM_NULL || !pending_on(c)) continue;
        int posted = requests && requests[i] != MPI_REQUEST_NULL;
        judged_all(c, all ? agreed[i] : NULL, posted && PMPI_Wait(&requests[i], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        i++;
    }
    for (int j = 0; agreed && j < comms; j++) free(agreed[j]);
    free(agreed), free(requests);
    say_too_few();
}

/* a learn entry's call: the arm its learner names runs, timed where it is a block's visit; 1 where a schedule ran
   (its result in *result), 0 where the library's own is to run (*timing: time it and give it to visited) */
int learned_call(comm_state *c, const entry *e, const void *send, void *recv, MPI_Count bytes, int *result,
                 learning **timing, int *schedule, a2ax_error *failure) {
    learning *g = learning_of(c, e, bytes);
    if (!g) return passed(ALLTOALL, PREPARE);
    int timed, arm = learn_next(&g->l, &timed), k = arm ? e->candidates[arm - 1] : -1;
    a2ax_plan *plan = k >= 0 ? bound(c, k, send, recv, (MPI_Aint)bytes, NULL) : NULL;
    if (!plan) { /* the library's own, or a candidate that could not be prepared (out of memory): it runs there */
        if (timed) *timing = g, g->arm = arm;
        return passed(ALLTOALL, k >= 0 ? PREPARE : LEARNING);
    }
    double start = PMPI_Wtime();
    *result = a2ax_run(plan);
    double seconds = PMPI_Wtime() - start;
    *schedule = k, *failure = a2ax_failed(plan);
    counted(&the.served[ALLTOALL * the.deploy->nschedules + k]);
    if (timed && *result == MPI_SUCCESS) visited(g, arm, seconds); /* a failed exchange's time is no visit's */
    return 1;
}

static void print_series(FILE *out, int live, const learn_series *s) {
    fprintf(out, " %s:", live ? "live" : "dropped");
    for (int i = 0; i < s->count; i++) fprintf(out, "%s%.6g", i ? "," : "", s->values[i]);
    if (!s->count) fprintf(out, "-");
}

void learned_line(FILE *out, const char *word, int collective, int nprocs, const int *layout, long long low,
                  long long high, const learner *l) {
    fprintf(out, "%s%s %d ", word, collective_name[collective], nprocs);
    if (!layout) fprintf(out, "*");
    for (int r = 0; layout && r < nprocs; r++) fprintf(out, "%s%d", r ? "," : "", layout[r]);
    fprintf(out, " %lld %lld %s %d %lld %lld %lld %.9g", low, high, learn_state_name[l->state], l->choice, l->calls,
            l->explored, l->revisited, l->cost);
    print_series(out, 1, &l->library);
    for (int a = 1; a < l->narms; a++) print_series(out, l->live[a], &l->ratio[a]);
    fprintf(out, "\n");
}

/* rank 0's learning of this size class with the most calls (communicators of one size learn apart) */
static const learning *most_calls(int collective, int nprocs, const int *layout, long long low) {
    const learning *best = NULL;
    for (comm_state *c = the.states; c; c = c->next)
        for (const learning *g = c->learnings; g; g = g->next)
            if (g->e->collective == collective && g->e->nprocs == nprocs && g->low == low &&
                same_layout(g->e->layout, layout, nprocs) && (!best || g->l.calls > best->l.calls))
                best = g;
    return best;
}

/* where the line after the one at `at` begins (the text ends with a newline: read_deploy checks) */
static long next_line(const char *text, long at) {
    return (long)(strchr(text + at, '\n') - text) + 1;
}

/* the deploy file again, its learned lines those of this run (merged with the file's for classes it did not meet):
   written whole to a temporary file, then renamed; 0, else the errno */
static int write_learned(const char *path) {
    const deploy_t *d = the.deploy;
    char *body = NULL, temporary[1100];
    size_t size = 0;
    FILE *out = open_memstream(&body, &size);
    if (!out) return errno;
    long end = d->length - 1, header = 0; /* the last line, 'end CHECKSUM'; the first 'schedule' line */
    while (end > 0 && d->text[end - 1] != '\n') end--;
    while (header < end && strncmp(d->text + header, "schedule ", 9) != 0) header = next_line(d->text, header);
    for (long at = 0; at < header; at = next_line(d->text, at))
        if (strncmp(d->text + at, "learned ", 8) && strncmp(d->text + at, "from learned ", 13))
            fwrite(d->text + at, 1, (size_t)(next_line(d->text, at) - at), out);
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(out, "from learned by liba2a at %s (A2A_LEARN_OUT)\n", stamp);
    for (comm_state *c = the.states; c; c = c->next)
        for (const learning *g = c->learnings; g; g = g->next)
            if (most_calls(g->e->collective, g->e->nprocs, g->e->layout, g->low) == g)
                learned_line(out, "learned ", g->e->collective, g->e->nprocs, g->e->layout, g->low, g->high, &g->l);
    for (int i = 0; i < d->nlearned; i++) {
        const learned_t *k = &d->learned[i];
        if (!most_calls(k->collective, k->nprocs, k->layout, k->low))
            learned_line(out, "learned ", k->collective, k->nprocs, k->layout, k->low, k->high, &k->l);
    }
    fwrite(d->text + header, 1, (size_t)(end - header), out);
    if (fclose(out)) return free(body), errno;
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    FILE *file = fopen(temporary, "w");
    unsigned long long sum = a2ax_fnv(body, size, A2AX_FNV_BASIS);
    int bad = !file || fprintf(file, "%send %016llx\n", body, sum) < 0;
    bad = (file && fclose(file)) || bad ? errno ? errno : EIO : rename(temporary, path) ? errno : 0;
    if (bad) remove(temporary);
    free(body);
    return bad;
}

/* the process counts of the deploy file's learn lines, for a line that says none served this run */
static void learn_counts(char *text, size_t room) {
    text[0] = 0;
    for (int i = 0; i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        int named = 0; /* each count once, in the file's order */
        for (int j = 0; j < i; j++)
            named |= the.deploy->entries[j].learn && the.deploy->entries[j].nprocs == e->nprocs;
        size_t used = strlen(text);
        if (e->learn && !named && used + 16 < room)
            snprintf(text + used, room - used, "%s%d", used ? ", " : "", e->nprocs);
    }
}

/* A2A_LEARN_OUT written on rank 0, or why not in one line; where no call of the run was in a learn range (a process
   count the file does not learn, say) it is written all the same, with what it had, and one line says so; the
   learnings freed */
void learned_out(void) {
    int rank, met = 0;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) rank = -1; /* none writes it */
    for (comm_state *c = the.states; c; c = c->next) met |= c->learnings != NULL;
    int why = rank == 0 && the.deploy && the.learn_out[0] ? write_learned(the.learn_out) : 0;
    if (why) {
        fprintf(stderr, "a2a: A2A_LEARN_OUT=%s cannot be written (%s); what was learned is not kept\n",
                the.learn_out, strerror(why));
    } else if (rank == 0 && the.deploy && the.learn_out[0] && !met) {
        char counts[256];
        learn_counts(counts, sizeof counts);
        fprintf(stderr, "a2a: A2A_LEARN_OUT=%s: no call of this run was in a learn range of A2A_DEPLOY=%s (it learns "
                "on communicators of %s ranks); written again with what it had\n", the.learn_out, the.path, counts);
    }
    for (comm_state *c = the.states; c; c = c->next)
        while (c->learnings) {
            learning *g = c->learnings;
            c->learnings = g->next;
            learn_free(&g->l);
            free(g->layout);
            free(g);
        }
}

