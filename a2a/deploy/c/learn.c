/* liba2a's learners: what learn.h says, and nothing that calls MPI. */
#include "learn.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const learn_state_name[LEARN_STATES] = {"exploring", "chosen", "kept", "undecided", "given-back"};

void learn_init(learner *l, int candidates, unsigned long long seed) {
    memset(l, 0, sizeof *l);
    l->narms = 1 + (candidates < LEARN_ARMS - 1 ? candidates : LEARN_ARMS - 1);
    for (int a = 0; a < l->narms; a++) l->live[a] = 1;
    l->seed = seed;
}

void learn_free(learner *l) {
    for (int a = 0; a < LEARN_ARMS; a++) free(l->ratio[a].values);
    free(l->library.values);
    memset(l, 0, sizeof *l);
}

int learn_push(learn_series *s, double value) {
    if (s->count == LEARN_KEEP) { /* the oldest half goes: a long run's revisits judge only their latest rounds */
        memmove(s->values, s->values + LEARN_KEEP / 2, sizeof(double) * (LEARN_KEEP / 2));
        s->count = LEARN_KEEP / 2;
    }
    if (s->count == s->room) {
        int room = s->room ? 2 * s->room : 64;
        double *more = realloc(s->values, sizeof(double) * (size_t)room);
        if (!more) return 1;
        s->values = more, s->room = room;
    }
    s->values[s->count++] = value;
    return 0;
}

/* splitmix64: every rank draws the same numbers from the same seed */
static unsigned long long draw(learner *l) {
    unsigned long long z = l->seed + 0x9e3779b97f4a7c15ULL * ++l->draws;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* the next round's order: the live arms (exploring) or the library and the choice (revisiting), shuffled */
static void next_round(learner *l) {
    l->nvisits = 0;
    for (int a = 0; a < l->narms; a++)
        if (l->state == LEARN_EXPLORING ? l->live[a] : a == 0 || a == l->choice) l->order[l->nvisits++] = a;
    for (int i = l->nvisits - 1; i > 0; i--) {
        int j = (int)(draw(l) % (unsigned long long)(i + 1)), t = l->order[i];
        l->order[i] = l->order[j], l->order[j] = t;
    }
    l->visit = 0;
}

static int wants_block(const learner *l) {
    return l->state == LEARN_EXPLORING || l->state == LEARN_CHOSEN;
}

int learn_next(learner *l, int *timed) {
    l->calls++;
    *timed = 0;
    if (!l->in_block) {
        if (l->gap > 0 || !wants_block(l)) {
            if (l->gap > 0) l->gap--;
            return l->choice;
        }
        l->in_block = 1, l->round = 0, l->rounds = l->warmed ? LEARN_BLOCK : LEARN_FIRST;
        memset(l->times, 0, sizeof l->times);
        next_round(l);
    }
    *timed = 1;
    *(l->state == LEARN_EXPLORING ? &l->explored : &l->revisited) += 1;
    return l->order[l->visit];
}

int learn_took(learner *l, int arm, double seconds) {
    l->times[l->round][arm] = seconds > 0 ? seconds : 1e-9; /* 0 marks an arm the round did not visit */
    if (++l->visit < l->nvisits) return 0;
    if (++l->round < l->rounds) {
        next_round(l);
        return 0;
    }
    l->in_block = 0;
    return 1;
}

double *learn_times(learner *l, int *count) {
    *count = LEARN_BLOCK * LEARN_ARMS;
    return &l->times[0][0];
}

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* a sorted copy of a series' last `last` values (NULL where empty or out of memory) */
static double *sorted(const learn_series *s, int last, int *n) {
    *n = last < s->count ? last : s->count;
    double *copy = *n ? malloc(sizeof(double) * (size_t)*n) : NULL;
    if (!copy) return NULL;
    memcpy(copy, s->values + s->count - *n, sizeof(double) * (size_t)*n);
    qsort(copy, (size_t)*n, sizeof(double), ascending);
    return copy;
}

double learn_median(const learn_series *s, int last) {
    int n;
    double *x = sorted(s, last, &n), median = 0;
    if (x) median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
    free(x);
    return median;
}

void learn_interval(const learn_series *s, int last, double alpha, double *low, double *high) {
    int n, k = 0;
    double *x = sorted(s, last < 1000 ? last : 1000, &n); /* 1000 at most: 2^-n stays a double */
    *low = -INFINITY, *high = INFINITY;
    if (!x) return;
    /* the largest k with P(Binomial(n, 1/2) <= k - 1) <= alpha / 2: [x(k), x(n - k + 1)] covers the median */
    double term = 1, below = 0;
    for (int i = 0; i < n; i++) term *= 0.5;
    for (int j = 0; j < n / 2; j++) {
        below += term;
        if (below > alpha / 2) break;
        k = j + 1;
        term *= (double)(n - j) / (j + 1);
    }
    if (k > 0) *low = x[k - 1], *high = x[n - k];
    free(x);
}

double learn_level(const learner *l, const learn_settings *s) {
    return s->alpha / ((l->narms - 1) * (LEARN_ROUNDS / LEARN_BLOCK));
}

/* the block's agreed times as evidence (each round's ratios to the library's), and what its visits cost: each
   visit at its arm's median ratio so far, not its own time (a stall hits any arm's visit, and would be charged to
   whichever ran then) */
static void weigh(learner *l) {
    int revisit = l->state == LEARN_CHOSEN, visits[LEARN_ARMS] = {0};
    for (int r = 0; r < l->rounds; r++) {
        for (int a = 0; a < l->narms; a++) visits[a] += l->times[r][a] > 0;
        if (!l->warmed) { /* the class's first round: plans and caches warming, counted in the cost only */
            l->warmed = 1;
            continue;
        }
        learn_push(&l->library, l->times[r][0]);
        for (int a = 1; a < l->narms; a++)
            if (l->times[r][a] > 0) learn_push(&l->ratio[a], log(l->times[r][a] / l->times[r][0]));
    }
    double library = learn_median(&l->library, INT_MAX);
    if (revisit) /* the library's visits cost what the choice saves */
        l->cost += visits[0] * library * (1 - exp(learn_median(&l->ratio[l->choice], INT_MAX)));
    else
        for (int a = 1; a < l->narms; a++)
            l->cost += visits[a] * library * (exp(learn_median(&l->ratio[a], INT_MAX)) - 1);
}

/* calls before the next block: exploring's cost, with the next block's expected, within cap of the library's time */
static long long paced(const learner *l, const learn_settings *s, double library) {
    double next = 0;
    for (int a = 1; a < l->narms; a++)
        if (l->live[a]) next += LEARN_BLOCK * library * fmax(0, exp(learn_median(&l->ratio[a], INT_MAX)) - 1);
    double needed = (l->cost + next) / (s->cap * library) - (double)l->calls;
    return needed > 0 ? (long long)ceil(fmin(needed, 1e15)) : 0;
}

static void explored(learner *l, const learn_settings *s) {
    double library = learn_median(&l->library, INT_MAX), bound = log1p(s->margin), level = learn_level(l, s);
    int best = 0, live = 0;
    for (int a = 1; a < l->narms; a++) {
        if (!l->live[a]) continue;
        double low, high, median = learn_median(&l->ratio[a], INT_MAX);
        learn_interval(&l->ratio[a], INT_MAX, level, &low, &high);
        if (high < -bound && (!best || median < learn_median(&l->ratio[best], INT_MAX))) best = a;
        else if (low > -bound || (l->ratio[a].count >= LEARN_BLOCK - 1 && median > log(LEARN_SLOWER))) l->live[a] = 0;
        live += l->live[a];
    }
    if (best) {
        l->state = LEARN_CHOSEN, l->choice = best, l->gap = s->revisit;
        for (int a = 1; a < l->narms; a++) l->live[a] = a == best;
    } else if (!live) {
        l->state = LEARN_KEPT, l->gap = LLONG_MAX;
    } else if (l->library.count >= LEARN_ROUNDS) {
        l->state = LEARN_UNDECIDED, l->gap = LLONG_MAX;
    } else {
        l->gap = library > 0 ? paced(l, s, library) : 0;
    }
}

/* after a revisit: the choice goes back to the library where its latest rounds' interval (level 1 - alpha, one
   look) lies wholly above -log(1 + margin): its advantage is gone, or below the margin */
static void revisited(learner *l, const learn_settings *s) {
    double low, high;
    learn_interval(&l->ratio[l->choice], LEARN_WINDOW, s->alpha, &low, &high);
    if (low > -log1p(s->margin)) l->state = LEARN_GIVEN_BACK, l->choice = 0, l->gap = LLONG_MAX;
    else l->gap = s->revisit;
}

void learn_decide(learner *l, const learn_settings *s) {
    weigh(l);
    if (l->state == LEARN_EXPLORING) explored(l, s);
    else revisited(l, s);
}
