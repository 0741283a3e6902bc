/* liba2a's report (A2A_DEPLOY_REPORT): at MPI_Finalize rank 0 prints per collective the calls seen, served per
   schedule and passed through per reason, and what each learner found */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* one collective's line of the report: seen, served (by schedule name: one algorithm's schedules for each process
   count together), passed through by reason; counts = seen, passed[REASONS], served[n] */
static void print_collective(int k, long long *counts, int n) {
    long long served = 0, *by_schedule = counts + 1 + REASONS;
    for (int i = 0; i < n; i++) served += by_schedule[i];
    fprintf(stderr, "  %s: seen %lld, served %lld", collective_name[k], counts[0], served);
    int any = 0;
    for (int i = 0; i < n; i++) {
        long long calls = 0;
        for (int j = i; j < n; j++)
            if (strcmp(the.deploy->names[j], the.deploy->names[i]) == 0) calls += by_schedule[j], by_schedule[j] = 0;
        if (calls) fprintf(stderr, "%s%s %lld", any++ ? ", " : " (", the.deploy->names[i], calls);
    }
    fprintf(stderr, "%s, passed through:", any ? ")" : "");
    any = 0;
    for (int i = 0; i < REASONS; i++)
        if (counts[1 + i]) fprintf(stderr, "%s %s %lld", any++ ? "," : "", reason_text[i], counts[1 + i]);
    fprintf(stderr, "%s\n", any ? "" : " none");
}

static const char *arm_name(const entry *e, int arm) {
    int k = arm ? e->candidates[arm - 1] : -1;
    return k >= 0 ? the.deploy->names[k] : arm ? "control" : "the library's own";
}

static void span(char *text, size_t room, long long low, long long high) {
    snprintf(text, room, high < 0 ? "%lld B and up" : "%lld-%lld B", low, high);
}

/* the report's lines for one size class on one communicator: what it serves, the evidence, what exploring cost */
static void print_learning(const learning *g) {
    const learner *l = &g->l;
    double cost, spent, low, high;
    int known = learn_cost(l, &cost, &spent); /* priced now: the calls since the last block too */
    char range[64];
    span(range, sizeof range, g->low, g->high);
    fprintf(stderr, "  learn %s on %d ranks, %s: %lld calls, %lld exploring, %lld revisiting the library%s; ",
            collective_name[g->e->collective], g->c->size, range, l->calls - g->before[0],
            l->explored - g->before[1], l->revisited - g->before[2],
            g->from == FROM_STORE  ? " (this run; the store's evidence before it: A2A_LEARN_DIR)"
            : g->from == FROM_FILE ? " (this run; the file's evidence before it)"
                                   : "");
    if (l->state == LEARN_CHOSEN) {
        learn_interval(&l->ratio[l->choice], INT_MAX, learn_level(l, &the.learn), &low, &high);
        fprintf(stderr, "serves %s, %.2fx the library's time (median of %d rounds, interval %.2f-%.2fx)",
                arm_name(g->e, l->choice), exp(learn_median(&l->ratio[l->choice], INT_MAX)), l->ratio[l->choice].count,
                exp(low), exp(high));
    } else {
        static const char *const why[LEARN_STATES] = {
            "still exploring when the run ended", "", "no candidate faster by the margin",
            "undecided after the most rounds", "the choice's advantage was gone at a revisit: exploring again"};
        fprintf(stderr, "the library's own serves (%s)", why[l->state]);
    }
    if (!known || !(spent > 0))
        fprintf(stderr, "; exploring cost not known yet: the library's own not timed here yet (cap %.0f %%)",
                100 * the.learn.cap);
    else
        fprintf(stderr, "; exploring cost %.3g ms, %.1f %% of the library's time here (cap %.0f %%%s)", 1e3 * cost,
                100 * cost / spent, 100 * the.learn.cap,
                cost > the.learn.cap * spent ? "; passed by the first rounds: too few calls of this size paid for them"
                                             : "");
    int arms = too_few(g);
    if (arms)
        fprintf(stderr, "; this run's %lld calls complete no round of its %d arms (%d warm-ups in a run, then a visit "
                "of each: %d calls at least), so runs like this one never learn it: learn fewer candidates (bench "
                "deploy --learn --candidates) or run more calls a run", l->calls - g->before[0], arms, arms - 1,
                2 * arms - 1);
    fprintf(stderr, "\n");
    for (int a = 1; a < l->narms; a++) {
        char interval[96] = "too few rounds for an interval";
        learn_interval(&l->ratio[a], INT_MAX, learn_level(l, &the.learn), &low, &high);
        if (isfinite(low) && isfinite(high))
            snprintf(interval, sizeof interval, "interval %.2f-%.2fx at level %.2g", exp(low), exp(high),
                     learn_level(l, &the.learn));
        fprintf(stderr, "    %s: %.2fx the library's over %d round%s (%s)%s\n", arm_name(g->e, a),
                exp(learn_median(&l->ratio[a], INT_MAX)), l->ratio[a].count, l->ratio[a].count == 1 ? "" : "s",
                interval, a == l->choice ? ", chosen" : l->live[a] ? "" : ", dropped");
    }
}

/* how a communicator's learned alltoallv calls agreed on their classes (liba2a_learnv.c), where it had any */
static void print_agreement(const comm_state *c) {
    if (!c->v.agreements) return;
    fprintf(stderr, "  learn alltoallv on %d ranks: the class (the largest block any rank sent one peer) agreed %lld "
            "times, %lld of them by a probe of its own; %lld round%s set aside (calls of another class)\n", c->size,
            c->v.agreements, c->v.probes, c->v.aside, c->v.aside == 1 ? "" : "s");
}

/* what liba2a does at the program's thread level (docs/liba2a.md) */
static const char *thread_support(int level) {
    if (level == MPI_THREAD_MULTIPLE)
        return "MPI_THREAD_MULTIPLE: all-to-alls served from any thread, at once on different communicators (first "
               "calls, recording and learning included)";
    if (level == MPI_THREAD_SERIALIZED)
        return "MPI_THREAD_SERIALIZED: all-to-alls served from any thread, one MPI call at a time";
    return level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED: all-to-alls served from the main thread"
                                        : "MPI_THREAD_SINGLE: all-to-alls served from the one thread";
}

/* at MPI_Finalize, on rank 0: per collective, the calls seen, served per schedule name, passed through per reason */
void print_report(void) {
    int rank, size, n = the.deploy ? the.deploy->nschedules : 0, per = 1 + REASONS + n;
    long long *local = calloc((size_t)(2 * COLLECTIVES * per), sizeof(long long)), *sum = local + COLLECTIVES * per;
    if (!local) return;
    for (int k = 0; k < COLLECTIVES; k++) {
        local[k * per] = the.seen[k];
        memcpy(local + k * per + 1, the.passed[k], sizeof the.passed[k]);
        if (n) memcpy(local + k * per + 1 + REASONS, the.served + k * n, sizeof(long long) * (size_t)n);
    }
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || PMPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS ||
        PMPI_Reduce(local, sum, COLLECTIVES * per, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "a2a: A2A_DEPLOY_REPORT: MPI failed while the counts were summed; no report\n");
        free(local);
        return;
    }
    if (rank == 0) {
        fprintf(stderr, "a2a deploy report (%s%s; calls summed over %d ranks; bindings intercepted: C and Fortran, "
                "MPI_Init through %s)\n", the.deploy || the.path[0] ? the.path : "no deploy file",
                the.deploy || !the.path[0] ? "" : ", not in use: see the line at MPI_Init", size,
                the.fortran ? "Fortran" : "C");
        fprintf(stderr, "  threads: %s\n", thread_support(the.thread_level));
        for (int k = 0; k < COLLECTIVES; k++) print_collective(k, sum + k * per, n);
        for (comm_state *c = the.states; c; c = c->next) {
            for (const learning *g = c->learnings; g; g = g->next) print_learning(g);
            print_agreement(c);
        }
        for (int i = 0; the.deploy && i < the.deploy->nunverified; i++)
            fprintf(stderr, "  unverified: the entries for %d ranks, which the decision never measured (it took the "
                    "table of %d ranks)\n", the.deploy->unverified[i][0], the.deploy->unverified[i][1]);
    }
    free(local);
}

