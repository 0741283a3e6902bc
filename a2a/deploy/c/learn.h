/* Online selection over a program's own calls: liba2a's learners (a deploy file's `learn` lines, docs/deploy.md).
 *
 * A learner serves one size class of one collective on one communicator. Arm 0 is the MPI library's own algorithm;
 * arms 1.. are the candidates. It explores in blocks of rounds: a round visits every live arm once, in a seeded order
 * that every rank draws alike; at a block's end the caller agrees the block's times (each the slowest rank's: a
 * maximum over the communicator) and the learner decides from agreed numbers only, so every rank takes the same
 * next step at the same call. Between blocks the arm it holds serves (the library's until a candidate is chosen).
 *
 * The evidence is the log ratio of an arm's time to the library's in the same round. A candidate is chosen only where
 * the sign test's interval for the median ratio lies wholly below -log(1 + margin), at a level corrected for every
 * candidate and every look (Bonferroni: alpha / (candidates x most looks)); it is dropped where the interval lies
 * wholly above it (it cannot be shown faster by the margin), or at once where its median ratio passes SLOWER (no
 * correction: dropping keeps the library's). Blocks are paced so that what exploring cost (each visit at its arm's
 * median ratio to the library's) stays within `cap` of the library's time over the class's calls so far: the next
 * block waits for the calls that pay for it, so only a block's misestimate can pass the cap, the first's above all
 * (FIRST rounds, before anything is known; a candidate twice the library's time or more over 3 rounds is dropped).
 * After a candidate is chosen, the library is revisited every `revisit` calls, one block of both; the choice goes
 * back to the library when the interval of its last WINDOW rounds (level 1 - alpha) lies wholly above
 * -log(1 + margin): its advantage is gone.
 *
 * No MPI here: the caller times, agrees and runs. */
#ifndef A2A_LEARN_H
#define A2A_LEARN_H

#define LEARN_ARMS 8      /* the library and up to 7 candidates */
#define LEARN_BLOCK 4     /* rounds per block */
#define LEARN_FIRST 2     /* rounds of a class's first block: its warm-up and one, before anything is known */
#define LEARN_ROUNDS 128  /* the most rounds a class explores; then the library is kept, undecided */
#define LEARN_WINDOW 16   /* the revisits' latest rounds judged for drift */
#define LEARN_SLOWER 2    /* a candidate whose median ratio passes this is dropped at once: clearly slower */
#define LEARN_KEEP 4096   /* the most values kept per series (the oldest half dropped beyond) */

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
    learn_state state;
    int choice;                  /* the arm serving outside blocks */
    long long calls, gap;        /* the class's calls; calls before the next block */
    long long explored, revisited; /* calls run as visits of exploring blocks, and of revisits */
    int in_block, rounds, round, visit, nvisits, order[LEARN_ARMS], warmed;
    unsigned long long seed, draws;
    double times[LEARN_BLOCK][LEARN_ARMS]; /* this block's seconds: each rank's, then the slowest rank's */
    learn_series ratio[LEARN_ARMS];        /* per candidate, log(its time / the library's) per round */
    learn_series library;                  /* the library's time per round */
    double cost;                           /* seconds that visits took beyond the library's (or the choice's) */
} learner;

void learn_init(learner *l, int candidates, unsigned long long seed);
void learn_free(learner *l);
/* the arm this call runs; *timed: a visit of a block (time it and give the time to learn_took) */
int learn_next(learner *l, int *timed);
/* a visit's seconds; 1 when the block is complete: agree learn_times (maximum), then learn_decide */
int learn_took(learner *l, int arm, double seconds);
double *learn_times(learner *l, int *count);
void learn_decide(learner *l, const learn_settings *s);
/* the median of a series' last `last` values (all where last exceeds them); 0 where it is empty */
double learn_median(const learn_series *s, int last);
/* the sign test's interval for the median of a series' last `last` values at level 1 - alpha (-inf, inf where too
   few values) */
void learn_interval(const learn_series *s, int last, double alpha, double *low, double *high);
/* the per-comparison level of a verdict: alpha over every candidate and look */
double learn_level(const learner *l, const learn_settings *s);
int learn_push(learn_series *s, double value);

#endif
