/* liba2a's learner (a2a/deploy/c/learn.c) over synthetic programs, many seeds each, no MPI: every call's time is
 * its arm's base time times log-normal noise (sigma), one process standing for the agreed slowest rank.
 *
 *   learn_check SCENARIO RUNS CALLS
 *     aa       three candidates as fast as the library
 *     faster   candidate 2 takes 0.7 of the library's time, 1 and 3 1.0 and 1.5
 *     slower   three candidates 3x the library's
 *     drift    candidate 1 takes 0.6 for the first half of the calls, then 1.5
 *
 * One line per run: STATE CHOICE EXPLORED REVISITED EXTRA, EXTRA being what the run's arms took beyond the library's
 * own base time, as a share of the library's time over every call (the true cost of learning, which the learner
 * only estimates). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../a2a/deploy/c/learn.h"

static unsigned long long state;

static double uniform(void) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((state >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void) {
    return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static double base(const char *scenario, int arm, long call, long calls) {
    static const double faster[] = {1.0, 1.0, 0.7, 1.5};
    if (strcmp(scenario, "faster") == 0) return faster[arm];
    if (strcmp(scenario, "slower") == 0) return arm ? 3.0 : 1.0;
    if (strcmp(scenario, "drift") == 0) return arm == 1 ? (call < calls / 2 ? 0.6 : 1.5) : 1.0;
    return 1.0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: learn_check aa|faster|slower|drift RUNS CALLS\n");
        return 2;
    }
    const char *scenario = argv[1];
    int runs = atoi(argv[2]);
    long calls = atol(argv[3]);
    learn_settings settings = {.cap = 0.05, .margin = 0.05, .alpha = 0.05, .revisit = 1000};
    for (int run = 0; run < runs; run++) {
        learner l;
        learn_init(&l, 3, 1000 + (unsigned long long)run);
        state = 77 + (unsigned long long)run;
        double extra = 0;
        for (long call = 0; call < calls; call++) {
            int timed, arm = learn_next(&l, &timed);
            double b = base(scenario, arm, call, calls), seconds = 1e-5 * b * exp(0.3 * normal());
            extra += b - base(scenario, 0, call, calls);
            if (timed && learn_took(&l, arm, seconds)) learn_decide(&l, &settings);
        }
        printf("%s %d %lld %lld %.4f\n", learn_state_name[l.state], l.choice, l.explored, l.revisited, extra / calls);
        learn_free(&l);
    }
    return 0;
}
