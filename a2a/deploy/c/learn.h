/* Online selection over a program's own calls: liba2a's learners (a deploy file's `learn` lines, docs/learn.md).
 *
 * A learner serves one size class of one collective on one communicator. Arm 0 is the MPI library's own algorithm;
 * arms 1.. are the candidates. It explores in blocks of rounds: a round visits every live arm once, in a seeded order
 * that every rank draws alike; at a block's end the caller agrees the block's times (each the slowest rank's: a
 * maximum over the communicator) and the learner decides from agreed numbers only, so every rank takes the same
 * next step at the same call. Between blocks the arm it holds serves (the library's until a candidate is chosen).
 *
 * The evidence is the log ratio of a candidate's time to the library's in the same round, and what decides is the
 * count of rounds below -log(1 + margin): n rounds, S of them below. Where the candidate is no faster than the margin
 * a round is below with probability at most 1/2, and the e-value E(n, S) (the likelihood ratio of the count against
 * 1/2, mixed over a uniform alternative in [1/2, 1]) is a test supermartingale: by Ville's inequality it passes 1/a
 * at any look, ever, with probability at most a. A candidate is chosen where its E passes candidates / (alpha x
 * share); of those that pass, the fastest (least median ratio). E depends on (n, S) only, so the evidence carries
 * across blocks and runs without adding looks to correct for. Correlated rounds widen the count's spread: n and
 * S - n/2 are narrowed by the variance factor that the lag-1 autocorrelation of the rounds' ranks implies for an
 * AR(1)'s signs (measured, not proven: docs/findings/learn-rule.md). A candidate is dropped where the mirror
 * e-value (rounds at or above the bound) passes 1 / alpha, or where its median ratio over 3 rounds or more passes
 * SLOWER.
 *
 * Cost: every visit is priced at its arm's median ratio to the library's times the library's median, re-priced at
 * every block (a stall that hits one visit moves no median for long); an arm with fewer than FEW rounds is priced
 * between the library's time and SLOWER times it. Blocks are paced so that the cost, with the next block's, stays
 * within `cap` of the library's time over the class's calls (over a chain of runs: `calls` carries on).
 *
 * After a candidate is chosen, the library is revisited every `revisit` calls, one block of the two. The revisits'
 * rounds are a series of their own. Against 'the choice is still at least as fast as the library', the count of its
 * rounds slower than the library's gives an e-value E_j from each revisit j on (the same mixture); the give-back's
 * e-value is their weighted sum, weights 1/2 for the first revisit and 1/(2 j (j - 1)) for the j-th, and the choice
 * is given back where it passes 1 / alpha. A weighted sum of test supermartingales is one: by Ville, a choice that
 * stays at least as fast is given back with probability at most alpha over every revisit, however many; a change at
 * any revisit is caught by the e-values started near it. The class then explores again, its earlier rounds set
 * aside, at half the share.
 *
 * Warm-up: an arm's first visit in a learner's life (a run) is a warm-up visit, outside the rounds, where its plan is
 * built at that visit: every candidate unless the caller marks it warm (warm[a]); never the library's own, for which
 * liba2a builds no plan.
 *
 * No MPI here: the caller times, agrees and runs. */
#ifndef A2A_LEARN_H
#define A2A_LEARN_H

#define LEARN_ARMS 8      /* the library and up to 7 candidates */
#define LEARN_BLOCK 4     /* rounds per block */
#define LEARN_FIRST 2     /* rounds of an exploration's first block, before anything is known */
#define LEARN_ROUNDS 128  /* the most rounds an exploration takes; then the library is kept, undecided */
#define LEARN_WINDOW 16   /* the revisits' latest rounds that price them */
#define LEARN_FEW 3       /* an arm with fewer rounds is priced within [1, SLOWER] of the library's time */
#define LEARN_SLOWER 2    /* a candidate whose median ratio passes this is dropped at once: clearly slower */
#define LEARN_KEEP 4096   /* the most values kept per series (the oldest half dropped beyond) */
#define LEARN_STARTS 64   /* the latest revisits from which the give-back's e-values run */

typedef enum { LEARN_EXPLORING, LEARN_CHOSEN, LEARN_KEPT, LEARN_UNDECIDED, LEARN_GIVEN_BACK, LEARN_STATES } learn_state;
extern const char *const learn_state_name[LEARN_STATES];

typedef struct {
    double cap, margin, alpha; /* exploring's cost per the library's time; the smallest difference; the risk */
    long long revisit;         /* calls between revisits of the library after a choice */
} learn_settings;

typedef struct {
    double *values;
    int count, room;
} learn_series;

typedef struct {
    int narms;                   /* 1 + candidates */
    int live[LEARN_ARMS];        /* candidates still explored (arm 0: always) */
    learn_state state;           /* given-back: exploring again after a choice was given back */
    int choice;                  /* the arm serving outside blocks */
    long long calls, gap;        /* the class's calls; calls before the next block */
    long long explored, revisited; /* calls run as visits of exploring blocks, and of revisits */
    int in_block, rounds, round, visit, nvisits, nwarm, order[2 * LEARN_ARMS];
    int warmed;                  /* set by a caller that restored the learner; the learner reads warm[] instead */
    int warm[LEARN_ARMS];        /* the arm has run in this learner's life: its next visit is no warm-up */
    unsigned long long seed, draws;
    double times[LEARN_BLOCK][LEARN_ARMS]; /* this block's seconds: each rank's, then the slowest rank's */
    learn_series ratio[LEARN_ARMS];        /* per candidate, log(its time / the library's) per round explored */
    learn_series library;                  /* the library's time per round */
    double cost;                           /* seconds that visits took beyond the library's (or the choice's) */
    double share;                /* this learner's part of alpha (learn_init: the first communicator's) */
    int givebacks;               /* choices given back: each halves the share of the exploring after it */
    long long visits[LEARN_ARMS];  /* exploring visits per arm in this learner's life, warm-ups included */
    long long library_revisits;    /* the library's revisit visits in this learner's life */
    int begun;                     /* the learner has run a call in this life */
    long long carried[2];          /* exploring and revisiting visits before this life, priced at the mean */
    double settled;                /* the cost of explorations before the latest give-back, as last priced */
    long long revisit_rounds, revisits; /* the revisits' rounds since the choice, and the revisits */
    struct { long long index; int rounds, slower; } since[LEARN_STARTS]; /* from the j-th revisit: rounds, slower */
    double recent[LEARN_WINDOW];   /* the revisits' latest log ratios (choice / library), a ring */
} learner;

void learn_init(learner *l, int candidates, unsigned long long seed);
void learn_free(learner *l);
/* the arm this call runs; *timed: a visit of a block (time it and give the time to learn_took) */
int learn_next(learner *l, int *timed);
/* a visit's seconds; 1 when the block is complete: agree learn_times (maximum), then learn_decide */
int learn_took(learner *l, int arm, double seconds);
double *learn_times(learner *l, int *count);
/* the block's completed rounds judged (a whole block, or what learn_pending counted) and the next step set */
void learn_decide(learner *l, const learn_settings *s);
/* the completed rounds of a block in progress (0 where none): at the run's end, agree learn_times and learn_decide
   to keep them */
int learn_pending(const learner *l);
/* what exploring and revisiting cost so far, priced now, and the library's time over the class's calls: 1, else 0
   where the library's own has not been timed yet in the class (the cost is not known) */
int learn_cost(const learner *l, double *cost, double *spent);
/* log of a candidate's e-value against 'no faster than the margin' (0 where it has no rounds) */
double learn_evidence(const learner *l, const learn_settings *s, int arm);
/* the share of alpha of the k-th communicator of one size to learn a class in a run (k = 1, 2, ...): 6 / (pi k)^2,
   which sum to 1 over every k (Bonferroni over communicators) */
double learn_share_of(int ordinal);
/* a learner restored from a learned line: the calls before its next block (a choice: `revisit`; exploring, or
   exploring again after a give-back: paced from the calls and cost carried, as learn_decide paces) */
void learn_resume(learner *l, const learn_settings *s);
/* the median of a series' last `last` values (all where last exceeds them); 0 where it is empty */
double learn_median(const learn_series *s, int last);
/* the sign test's interval for the median of a series' last `last` values at level 1 - alpha (-inf, inf where too
   few values) */
void learn_interval(const learn_series *s, int last, double alpha, double *low, double *high);
/* the per-candidate level of a verdict: alpha x share over every candidate */
double learn_level(const learner *l, const learn_settings *s);
int learn_push(learn_series *s, double value);

#endif
