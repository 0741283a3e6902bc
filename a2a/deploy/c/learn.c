/* liba2a's learners: what learn.h says, and nothing that calls MPI. */
#include "learn.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const learn_state_name[LEARN_STATES] = {"exploring", "chosen", "kept", "undecided", "given-back"};

static const double LN2 = 0.69314718055994531;
static const double WIDEN = 0.75; /* standard errors added to the autocorrelation that widens a count */

void learn_init(learner *l, int candidates, unsigned long long seed) {
    memset(l, 0, sizeof *l);
    l->narms = 1 + (candidates < LEARN_ARMS - 1 ? candidates : LEARN_ARMS - 1);
    for (int a = 0; a < l->narms; a++) l->live[a] = 1;
    l->seed = seed, l->share = learn_share_of(1);
}

void learn_free(learner *l) {
    for (int a = 0; a < LEARN_ARMS; a++) free(l->ratio[a].values);
    free(l->library.values);
    memset(l, 0, sizeof *l);
}

int learn_push(learn_series *s, double value) {
    if (s->count == LEARN_KEEP) { /* the oldest half goes: a long run's library times priced by their latest */
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

static int exploring(const learner *l) {
    return l->state == LEARN_EXPLORING || l->state == LEARN_GIVEN_BACK;
}

/* the library's own builds no plan of liba2a's: it never warms up */
static int cold(const learner *l, int arm) {
    return arm > 0 && !l->warm[arm];
}

static void shuffle(learner *l, int *arms, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(draw(l) % (unsigned long long)(i + 1)), t = arms[i];
        arms[i] = arms[j], arms[j] = t;
    }
}

/* the next round's order: the live arms (exploring) or the library and the choice (revisiting), shuffled, after a
   warm-up visit of each that has not run yet */
static void next_round(learner *l) {
    int arms[LEARN_ARMS], n = 0;
    for (int a = 0; a < l->narms; a++)
        if (exploring(l) ? l->live[a] : a == 0 || a == l->choice) arms[n++] = a;
    l->nwarm = 0;
    for (int i = 0; i < n; i++)
        if (cold(l, arms[i])) l->order[l->nwarm++] = arms[i];
    shuffle(l, arms, n);
    memcpy(l->order + l->nwarm, arms, sizeof(int) * (size_t)n);
    l->nvisits = l->nwarm + n, l->visit = 0;
}

static int wants_block(const learner *l) {
    return exploring(l) || l->state == LEARN_CHOSEN;
}

static int rounds_explored(const learner *l) {
    int most = 0;
    for (int a = 1; a < l->narms; a++) most = l->ratio[a].count > most ? l->ratio[a].count : most;
    return most;
}

int learn_next(learner *l, int *timed) {
    if (!l->begun) /* visits counted before this life (a restored class's): priced at the candidates' mean */
        l->begun = 1, l->carried[0] = l->explored, l->carried[1] = l->revisited;
    l->calls++;
    *timed = 0;
    if (!l->in_block) {
        if (l->gap > 0 || !wants_block(l)) {
            if (l->gap > 0) l->gap--;
            l->warm[l->choice] = 1; /* served: its plan is built */
            return l->choice;
        }
        l->in_block = 1, l->round = 0;
        l->rounds = exploring(l) && !rounds_explored(l) ? LEARN_FIRST : LEARN_BLOCK;
        memset(l->times, 0, sizeof l->times);
        next_round(l);
    }
    *timed = 1;
    int arm = l->order[l->visit];
    if (exploring(l)) l->explored++, l->visits[arm]++;
    else l->revisited++, l->library_revisits += arm == 0;
    l->warm[arm] = 1;
    return arm;
}

int learn_took(learner *l, int arm, double seconds) {
    if (l->visit >= l->nwarm) /* a warm-up's time is no evidence */
        l->times[l->round][arm] = seconds > 0 ? seconds : 1e-9; /* 0 marks an arm the round did not visit */
    if (++l->visit < l->nvisits) return 0;
    if (++l->round < l->rounds) {
        next_round(l);
        return 0;
    }
    return 1;
}

int learn_pending(const learner *l) {
    return l->in_block ? l->round : 0;
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
    return s->alpha * l->share / (l->narms - 1);
}

static double log_sum(double a, double b) {
    double most = fmax(a, b);
    return most == -INFINITY ? most : most + log(exp(a - most) + exp(b - most));
}

/* log P(Binomial(m, 1/2) <= s), summed from the smaller tail (1 - P(above s) past the middle), each term from the
   one before */
static double log_binomial_below(long long m, long long s) {
    int upper = s >= m / 2;
    long long j = upper ? s + 1 : s;
    if (j > m) return 0;
    double term = lgamma((double)m + 1) - lgamma((double)j + 1) - lgamma((double)(m - j) + 1) - (double)m * LN2;
    double total = term;
    for (;;) { /* the tail's terms only fall from here */
        if (upper ? ++j > m : --j < 0) break;
        term += upper ? log((double)(m - j + 1) / (double)j) : log((double)(j + 1) / (double)(m - j));
        total = log_sum(total, term);
        if (term < total - 40) break;
    }
    return upper ? log1p(-exp(total)) : total;
}

/* log E(n, S): the likelihood ratio of S successes in n rounds, success probability p against 1/2, mixed over p
   uniform in [1/2, 1]: 2^(n+1) B(S+1, n-S+1) P(Beta(S+1, n-S+1) > 1/2), the last P(Binomial(n+1, 1/2) <= S) */
static double log_evalue(long long n, long long s) {
    return (double)(n + 1) * LN2 + lgamma((double)s + 1) + lgamma((double)(n - s) + 1) - lgamma((double)n + 2) +
           log_binomial_below(n + 1, s);
}

static int below_bound(const learn_series *s, double bound) {
    int count = 0;
    for (int i = 0; i < s->count; i++) count += s->values[i] < -bound;
    return count;
}

typedef struct { double value; int at; } ranked;

static int by_value(const void *a, const void *b) {
    double x = ((const ranked *)a)->value, y = ((const ranked *)b)->value;
    return (x > y) - (x < y);
}

/* a series' values replaced by their ranks, centred (NULL where out of memory) */
static double *centred_ranks(const learn_series *s) {
    int n = s->count;
    ranked *order = malloc(sizeof(ranked) * (size_t)n);
    double *ranks = malloc(sizeof(double) * (size_t)n);
    if (!order || !ranks) return free(order), free(ranks), NULL;
    for (int i = 0; i < n; i++) order[i] = (ranked){s->values[i], i};
    qsort(order, (size_t)n, sizeof(ranked), by_value);
    for (int i = 0, j; i < n; i = j) { /* ties share their mean rank */
        for (j = i; j < n && order[j].value == order[i].value; j++) continue;
        for (int k = i; k < j; k++) ranks[order[k].at] = (i + j - 1) / 2.0 - (n - 1) / 2.0;
    }
    free(order);
    return ranks;
}

/* the factor by which correlated rounds widen the variance of a sign count: from the lag-1 autocorrelation of the
   ranks of the library's times and the live candidates' ratios (pooled: the rounds they share are alike
   correlated), plus WIDEN standard errors (small samples understate it), as an AR(1)'s signs would have it:
   1 + 2 sum_k (2/pi) asin(rho^k) */
static double widening(const learner *l) {
    double lag = 0, spread = 0;
    int pairs = 0;
    for (int a = 0; a < l->narms; a++) {
        const learn_series *s = a ? &l->ratio[a] : &l->library;
        double *ranks = l->live[a] && s->count >= 4 ? centred_ranks(s) : NULL;
        for (int i = 0; ranks && i < s->count; i++) {
            spread += ranks[i] * ranks[i];
            if (i) lag += ranks[i] * ranks[i - 1], pairs++;
        }
        free(ranks);
    }
    double rho = spread > 0 ? fmin(lag / spread + WIDEN / sqrt(pairs), 0.95) : 0, factor = 1, power = rho;
    for (int k = 1; k < 64 && power > 1e-6; k++, power *= rho) factor += 4 / 3.141592653589793 * asin(power);
    return factor;
}

/* the continued fraction of the incomplete beta function I_x(a, b) (modified Lentz), for x < (a + 1) / (a + b + 2) */
static double beta_fraction(double a, double b, double x) {
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = 1 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 300; m++)
        for (int odd = 0; odd < 2; odd++) {
            double step = odd ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                              : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
            d = 1 + step * d, c = 1 + step / c;
            d = 1 / (fabs(d) < tiny ? tiny : d), c = fabs(c) < tiny ? tiny : c;
            h *= d * c;
            if (odd && fabs(d * c - 1) < 1e-13) return h;
        }
    return h;
}

/* log I_{1/2}(a, b), the regularized incomplete beta function at 1/2 (from the side where the fraction converges) */
static double log_beta_below_half(double a, double b) {
    double front = lgamma(a + b) - lgamma(a) - lgamma(b) - (a + b) * LN2;
    if (0.5 < (a + 1) / (a + b + 2)) return front + log(beta_fraction(a, b, 0.5) / a);
    return log1p(-exp(front) * beta_fraction(b, a, 0.5) / b);
}

/* log E for a real count s of real n rounds: 2^(n+1) times the integral of p^s (1-p)^(n-s) over [1/2, 1], the same
   mixture as log_evalue (equal to it at whole numbers), where P(Beta(s+1, n-s+1) > 1/2) = I_{1/2}(n-s+1, s+1) */
static double log_evalue_real(double n, double s) {
    return (n + 1) * LN2 + lgamma(s + 1) + lgamma(n - s + 1) - lgamma(n + 2) + log_beta_below_half(n - s + 1, s + 1);
}

/* log E of the count S of n, its spread about n / 2 narrowed by the widening: n / widen rounds with S - n / 2 over
   widen above half of them, as many as carry the same information had they been independent. Both are real: rounding
   them (n to the nearest, the count down) cost up to a round's evidence at every look, and a choice a block or more
   where one round went the other way (a stall) */
static double log_evidence_of(long long n, long long s, double widen) {
    if (widen <= 1) return log_evalue(n, s);
    double m = (double)n / widen, below = m / 2 + ((double)s - (double)n / 2) / widen;
    return log_evalue_real(m, fmin(fmax(below, 0), m));
}

double learn_evidence(const learner *l, const learn_settings *s, int arm) {
    const learn_series *r = &l->ratio[arm];
    return r->count ? log_evidence_of(r->count, below_bound(r, log1p(s->margin)), widening(l)) : 0;
}

/* the log ratio that prices an arm's visits: its median, within [0, log SLOWER] until it has FEW rounds */
static double priced_ratio(const learn_series *s) {
    if (s->count >= LEARN_FEW) return learn_median(s, INT_MAX);
    return s->count ? fmin(fmax(learn_median(s, INT_MAX), 0), log(LEARN_SLOWER)) : log(LEARN_SLOWER);
}

static double recent_median(const learner *l) {
    learn_series s = {.values = (double *)l->recent, .count = (int)fmin((double)l->revisit_rounds, LEARN_WINDOW)};
    return learn_median(&s, INT_MAX);
}

/* the cost of the explorations since the latest give-back, and of the revisits, at the library's time `library`.
   Visits of earlier runs (the class's counts carried in, not per arm) are priced as the candidates' mean visit. */
static double priced(const learner *l, double library) {
    double cost = 0, mean = 0;
    for (int a = 1; a < l->narms; a++) {
        double price = library * expm1(priced_ratio(&l->ratio[a]));
        cost += (double)l->visits[a] * price, mean += price / l->narms; /* the library's visits cost nothing */
    }
    cost += (double)l->carried[0] * mean;
    if (l->choice) {
        double choice = l->revisit_rounds >= LEARN_FEW ? recent_median(l) : priced_ratio(&l->ratio[l->choice]);
        cost += (double)(l->library_revisits + l->carried[1] / 2) * library * -expm1(choice);
    }
    return cost;
}

int learn_cost(const learner *l, double *cost, double *spent) {
    double library = learn_median(&l->library, INT_MAX);
    *cost = l->settled, *spent = library * (double)l->calls;
    if (!l->library.count) return 0;
    *cost += priced(l, library);
    return 1;
}

/* the block's completed rounds as evidence: the library's time and, exploring, each candidate's log ratio to it;
   revisiting, the choice's, in the revisits' own series */
static void weigh(learner *l, int rounds) {
    if (!exploring(l)) { /* a revisit: the e-value from it on starts, in place of the oldest */
        int oldest = 0;
        for (int j = 1; j < LEARN_STARTS; j++) oldest = l->since[j].index < l->since[oldest].index ? j : oldest;
        l->since[oldest].index = ++l->revisits, l->since[oldest].rounds = l->since[oldest].slower = 0;
    }
    for (int r = 0; r < rounds; r++) {
        learn_push(&l->library, l->times[r][0]);
        if (exploring(l)) {
            for (int a = 1; a < l->narms; a++)
                if (l->times[r][a] > 0) learn_push(&l->ratio[a], log(l->times[r][a] / l->times[r][0]));
        } else if (l->times[r][l->choice] > 0) {
            double ratio = log(l->times[r][l->choice] / l->times[r][0]);
            l->recent[l->revisit_rounds++ % LEARN_WINDOW] = ratio;
            for (int j = 0; j < LEARN_STARTS; j++) /* every start so far, and this revisit's (index revisits + 1) */
                if (l->since[j].index) l->since[j].rounds++, l->since[j].slower += ratio > 0;
        }
    }
}

/* calls before the next block: the cost so far, with the next block's expected, within cap of the library's time */
static long long paced(const learner *l, const learn_settings *s, double library, double cost) {
    double next = 0;
    for (int a = 1; a < l->narms; a++)
        if (l->live[a]) next += (LEARN_BLOCK + cold(l, a)) * library * fmax(0, expm1(priced_ratio(&l->ratio[a])));
    double needed = (cost + next) / (s->cap * library) - (double)l->calls;
    return needed > 0 ? (long long)ceil(fmin(needed, 1e15)) : 0;
}

static void explored(learner *l, const learn_settings *s) {
    double bound = log1p(s->margin), choose = log((l->narms - 1) / (s->alpha * l->share)), drop = -log(s->alpha);
    double widen = widening(l), fastest = 0;
    int best = 0, live = 0;
    for (int a = 1; a < l->narms; a++) {
        if (!l->live[a]) continue;
        const learn_series *r = &l->ratio[a];
        long long n = r->count, below = below_bound(r, bound);
        double median = learn_median(r, INT_MAX);
        if (n && log_evidence_of(n, below, widen) >= choose) {
            if (!best || median < fastest) best = a, fastest = median;
        } else if ((n && log_evidence_of(n, n - below, widen) >= drop) ||
                   (n >= LEARN_FEW && median > log(LEARN_SLOWER))) {
            l->live[a] = 0;
        }
        live += l->live[a];
    }
    if (best) {
        l->state = LEARN_CHOSEN, l->choice = best, l->gap = s->revisit;
        l->revisit_rounds = l->revisits = 0;
        memset(l->since, 0, sizeof l->since);
        for (int a = 1; a < l->narms; a++) l->live[a] = a == best;
    } else if (!live) {
        l->state = LEARN_KEPT, l->gap = LLONG_MAX;
    } else if (rounds_explored(l) >= LEARN_ROUNDS) {
        l->state = LEARN_UNDECIDED, l->gap = LLONG_MAX;
    } else {
        double cost, spent;
        l->gap = learn_cost(l, &cost, &spent) ? paced(l, s, learn_median(&l->library, INT_MAX), cost) : 0;
    }
}

/* log of the give-back's e-value: the e-values from each revisit kept on, weighted 1/2 (the first) and
   1/(2 j (j - 1)) (the j-th) */
static double give_back_evidence(const learner *l) {
    double total = -INFINITY;
    for (int j = 0; j < LEARN_STARTS; j++) {
        double index = (double)l->since[j].index;
        if (index > 0)
            total = log_sum(total, log_evalue(l->since[j].rounds, l->since[j].slower) -
                                       (index == 1 ? LN2 : log(2 * index * (index - 1))));
    }
    return total;
}

/* after a revisit: the choice goes back to the library where the give-back's e-value passes 1 / alpha; the class
   then explores again from no rounds, at half the share */
static void revisited(learner *l, const learn_settings *s) {
    if (give_back_evidence(l) < -log(s->alpha)) {
        l->gap = s->revisit;
        return;
    }
    double spent;
    learn_cost(l, &l->settled, &spent);
    l->state = LEARN_GIVEN_BACK, l->choice = 0, l->givebacks++, l->share /= 2, l->gap = 0;
    l->library_revisits = l->carried[0] = l->carried[1] = 0; /* priced in settled from here */
    for (int a = 0; a < l->narms; a++) l->live[a] = 1, l->ratio[a].count = 0, l->visits[a] = 0;
}

double learn_share_of(int ordinal) {
    double k = ordinal > 1 ? ordinal : 1;
    return 6 / (3.141592653589793 * 3.141592653589793 * k * k);
}

void learn_resume(learner *l, const learn_settings *s) {
    double cost, spent;
    l->gap = l->state == LEARN_CHOSEN ? s->revisit : exploring(l) ? 0 : LLONG_MAX;
    if (exploring(l) && learn_cost(l, &cost, &spent)) l->gap = paced(l, s, learn_median(&l->library, INT_MAX), cost);
}

void learn_decide(learner *l, const learn_settings *s) {
    int rounds = l->round < l->rounds ? l->round : l->rounds;
    l->in_block = 0;
    weigh(l, rounds);
    if (exploring(l)) explored(l, s);
    else revisited(l, s);
    double spent;
    learn_cost(l, &l->cost, &spent);
}
