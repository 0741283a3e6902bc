/* liba2a's learner (a2a/deploy/c/learn.c) over synthetic programs, many seeded runs each, no MPI: every call's time
 * is its arm's base time (the library's: 1 ms) times log-normal noise, sigma per arm (its log ratio to the library's
 * sd sigma x sqrt 2), each arm's noise an AR(1) series over its calls where rho > 0. The visits (timed calls) draw
 * from a stream of their own, the other calls from another: two runs of one seed whose pacing differs (one with a
 * stall, one without) meet the same noise at their k-th visit. One process stands for the agreed slowest rank.
 *
 *   learn_check SCENARIO RUNS CALLS [SIGMA [RHO]]      (SIGMA 0.2, RHO 0 where left out)
 *     aa         three candidates as fast as the library
 *     faster     candidate 2 takes 0.7 of the library's time, 1 and 3 1.0 and 1.5
 *     slower     three candidates 3x the library's
 *     drift      candidate 1 takes 0.6 for the first half of the calls, then 1.5
 *     margin     three candidates at 1/1.05 of the library's time: the margin itself
 *     margin8    the margin on 8 communicators of one size at once (8 learners, the k-th at share 2^-k)
 *     x5, x1.3   candidate 1 takes 1/5 (1/1.3) of the library's time, 2 and 3 as much as the library
 *     stall      x5 with one 9 ms stall on candidate 1's first counted visit
 *     stall-lib  three candidates 2x the library's, one 9 ms stall on the library's first counted visit
 *     slowed     a class that chose candidate 1 (0.5x) meets it 2x slower than the library from its first call
 *     kept       a class that chose candidate 1 meets it still 1.05x faster: CALLS revisits
 *     chain-aa   10 runs of CALLS calls, the learner carried from run to run as a learned line carries it
 *     chain-x5   chain-aa with candidate 1 at 1/5 of the library's time
 *
 * One line per run: STATE CHOICE EXPLORED REVISITED EXTRA LEDGER ROUNDS BLOCKS CALL GIVEBACK. EXTRA: what the arms took
 * beyond the library's base time (stalls not counted), as a share of the library's time over every call (the true
 * cost of learning); LEDGER: the learner's own figure for it (nan: not known); ROUNDS: the chosen candidate's rounds
 * when it was chosen (-1: none); BLOCKS and CALL: blocks decided and the class's calls by then; GIVEBACK: the
 * revisit that gave the choice back (-1: none). Where a run has several learners (margin8), the line is the first's,
 * its CHOICE any learner's choice. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../a2a/deploy/c/learn.h"

#define LIBRARY 1e-3  /* the library's time per call, seconds */
#define STALL 9e-3    /* a stall planted on one visit */
#define COMMS 8       /* communicators of one size (margin8) */
#define CHAIN 10      /* runs in a chain */

typedef struct {
    unsigned long long state, between; /* the visits' draws, and the other calls': a pacing that differs (a stall's)
                                          leaves the visits' draws as they were */
    double sigma, rho, noise[LEARN_ARMS];
} noise_t;

typedef struct {
    const char *scenario;
    long calls;   /* calls of one run */
    int stall;    /* 1 while the planted stall is still to come */
    long long blocks, chosen_blocks, chosen_call;
    int chosen_rounds, giveback, revisits;
    double extra; /* seconds beyond the library's base over every call */
} run_t;

static double uniform(unsigned long long *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((*state >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(unsigned long long *state) {
    return sqrt(-2 * log(uniform(state))) * cos(6.283185307179586 * uniform(state));
}

/* the next call's log noise of an arm: AR(1) over its calls, stationary sd sigma; drawn from the visits' stream where
   the call is a visit (timed) */
static double noise(noise_t *n, int arm, int timed) {
    double draw = normal(timed ? &n->state : &n->between);
    n->noise[arm] = n->rho * n->noise[arm] + sqrt(1 - n->rho * n->rho) * n->sigma * draw;
    return n->noise[arm];
}

static double base(const char *scenario, int arm, long call, long calls) {
    static const double faster[] = {1.0, 1.0, 0.7, 1.5};
    if (arm == 0) return 1.0;
    if (!strcmp(scenario, "faster")) return faster[arm];
    if (!strcmp(scenario, "slower")) return 3.0;
    if (!strcmp(scenario, "stall-lib")) return 2.0;
    if (!strcmp(scenario, "drift")) return arm == 1 ? (call < calls / 2 ? 0.6 : 1.5) : 1.0;
    if (!strncmp(scenario, "margin", 6) || !strcmp(scenario, "kept")) return 1 / 1.05;
    if (!strcmp(scenario, "x5") || !strcmp(scenario, "stall") || !strcmp(scenario, "chain-x5"))
        return arm == 1 ? 0.2 : 1.0;
    if (!strcmp(scenario, "x1.3")) return arm == 1 ? 1 / 1.3 : 1.0;
    if (!strcmp(scenario, "slowed")) return 2.0;
    return 1.0;
}

/* one call of learner l: its arm runs, timed where it is a visit; a block's end decided */
static void call(learner *l, const learn_settings *s, run_t *r, noise_t *n, long at) {
    int timed, arm = learn_next(l, &timed);
    double b = base(r->scenario, arm, at, r->calls), seconds = LIBRARY * b * exp(noise(n, arm, timed));
    r->extra += LIBRARY * (b - 1);
    int counted = timed && l->visit >= l->nwarm, target = !strcmp(r->scenario, "stall") ? 1 : 0;
    if (r->stall && counted && arm == target) seconds += STALL, r->stall = 0;
    if (!timed || !learn_took(l, arm, seconds)) return;
    int was = l->state;
    learn_decide(l, s);
    r->blocks++;
    if (was == LEARN_CHOSEN) r->revisits++;
    if (l->state == LEARN_CHOSEN && was != LEARN_CHOSEN && r->chosen_rounds < 0)
        r->chosen_rounds = l->ratio[l->choice].count, r->chosen_blocks = r->blocks, r->chosen_call = l->calls;
    if (was == LEARN_CHOSEN && l->state != LEARN_CHOSEN && r->giveback < 0) r->giveback = r->revisits;
}

/* what a learned line carries into the next run, as the glue restores it: the rest starts afresh */
static void restored(learner *to, learner *from, int candidates, unsigned long long seed, const learn_settings *s) {
    learn_init(to, candidates, seed);
    to->state = from->state, to->choice = from->choice, to->calls = from->calls, to->explored = from->explored;
    to->revisited = from->revisited, to->cost = from->cost, to->warmed = 1;
    for (int a = 0; a < from->narms; a++) {
        to->live[a] = from->live[a];
        for (int i = 0; i < from->ratio[a].count; i++) learn_push(&to->ratio[a], from->ratio[a].values[i]);
    }
    for (int i = 0; i < from->library.count; i++) learn_push(&to->library, from->library.values[i]);
    learn_free(from);
    learn_resume(to, s);
}

/* a class that chose candidate 1 in an earlier run, on 20 rounds at 0.5x */
static void chosen_before(learner *l) {
    l->state = LEARN_CHOSEN, l->choice = 1, l->gap = 1000, l->warmed = 1;
    for (int a = 2; a < l->narms; a++) l->live[a] = 0;
    for (int i = 0; i < 20; i++) learn_push(&l->ratio[1], log(0.5)), learn_push(&l->library, LIBRARY);
}

/* the run's end: its completed rounds kept */
static void finish(learner *l, const learn_settings *s, run_t *r) {
    if (!learn_pending(l)) return;
    learn_decide(l, s);
    r->blocks++;
    if (l->state == LEARN_CHOSEN && r->chosen_rounds < 0)
        r->chosen_rounds = l->ratio[l->choice].count, r->chosen_blocks = r->blocks, r->chosen_call = l->calls;
}

static void print_run(const learner *l, const run_t *r, long long calls, int choice) {
    double cost, spent;
    int known = learn_cost(l, &cost, &spent);
    printf("%s %d %lld %lld %.4f %.4f %d %lld %lld %d\n", learn_state_name[l->state], choice, l->explored,
           l->revisited, r->extra / (LIBRARY * (double)calls), known && spent > 0 ? cost / spent : NAN,
           r->chosen_rounds, r->chosen_rounds < 0 ? -1 : r->chosen_blocks, r->chosen_rounds < 0 ? -1 : r->chosen_call,
           r->giveback);
}

static void one_run(const char *scenario, int run, long calls, double sigma, double rho, const learn_settings *s) {
    int comms = !strcmp(scenario, "margin8") ? COMMS : 1, chain = !strncmp(scenario, "chain", 5) ? CHAIN : 1;
    learner l[COMMS];
    noise_t n[COMMS];
    run_t r[COMMS];
    for (int k = 0; k < comms; k++) {
        learn_init(&l[k], 3, 1000 + (unsigned long long)run * 131 + (unsigned long long)k);
        l[k].share = learn_share_of(k + 1);
        n[k] = (noise_t){.state = 77 + (unsigned long long)run * 7919 + (unsigned long long)k * 104729,
                         .between = 91 + (unsigned long long)run * 6151 + (unsigned long long)k * 7727,
                         .sigma = sigma, .rho = rho};
        r[k] = (run_t){.scenario = scenario, .calls = calls, .chosen_rounds = -1, .giveback = -1,
                       .stall = !strncmp(scenario, "stall", 5)};
    }
    if (!strcmp(scenario, "slowed") || !strcmp(scenario, "kept")) chosen_before(&l[0]);
    long per_run = !strcmp(scenario, "kept") ? calls * (s->revisit + 2 * LEARN_BLOCK) : calls;
    for (int link = 0; link < chain; link++) {
        if (link) {
            learner next;
            restored(&next, &l[0], 3, 1000 + (unsigned long long)run * 131 + (unsigned long long)link, s);
            l[0] = next;
        }
        for (long at = 0; at < per_run; at++)
            for (int k = 0; k < comms; k++) call(&l[k], s, &r[k], &n[k], at);
        for (int k = 0; k < comms; k++) finish(&l[k], s, &r[k]);
    }
    int choice = 0;
    for (int k = 0; k < comms; k++) choice = choice ? choice : l[k].choice;
    print_run(&l[0], &r[0], per_run * chain, choice);
    for (int k = 0; k < comms; k++) learn_free(&l[k]);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: learn_check SCENARIO RUNS CALLS [SIGMA [RHO]] (scenarios: see its source)\n");
        return 2;
    }
    int runs = atoi(argv[2]);
    long calls = atol(argv[3]);
    double sigma = argc > 4 ? atof(argv[4]) : 0.2, rho = argc > 5 ? atof(argv[5]) : 0;
    learn_settings settings = {.cap = 0.05, .margin = 0.05, .alpha = 0.05, .revisit = 1000};
    for (int run = 0; run < runs; run++) one_run(argv[1], run, calls, sigma, rho, &settings);
    return 0;
}
