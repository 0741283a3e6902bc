/* liba2a's deploy file read and checked (a2a/deploy/file.py writes it and describes it) */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int fail(char *error, size_t room, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, room, format, args);
    va_end(args);
    return 1;
}

const char *family(const char *version) {
    if (strstr(version, "Open MPI")) return "Open MPI";
    if (strstr(version, "Intel")) return "Intel MPI";
    if (strstr(version, "MPICH")) return "MPICH";
    return "unknown";
}

void free_deploy(deploy_t *d) {
    if (!d) return;
    for (int i = 0; i < d->nentries; i++) free(d->entries[i].layout);
    for (int i = 0; i < d->nlearned; i++) free(d->learned[i].layout), learn_free(&d->learned[i].l);
    for (int i = 0; i < d->nschedules; i++) a2ax_schedule_free(d->schedules[i]);
    free(d->entries);
    free(d->learned);
    free(d->text);
    free(d->schedules);
    free(d->names);
    free(d);
}

static int parse_layout(const char *text, int nprocs, int **layout) {
    *layout = NULL;
    if (strcmp(text, "*") == 0) return 0;
    int *node = malloc(sizeof(int) * (size_t)nprocs);
    const char *at = text;
    for (int r = 0; node && r < nprocs; r++) {
        char *stop;
        node[r] = (int)strtol(at, &stop, 10);
        if (stop == at || (r < nprocs - 1 ? *stop != ',' : *stop != 0)) {
            free(node);
            return 1;
        }
        at = stop + 1;
    }
    *layout = node;
    return node == NULL;
}

static int collective_named(const char *word) {
    return strcmp(word, "alltoall") == 0 ? ALLTOALL : strcmp(word, "alltoallv") == 0 ? ALLTOALLV : -1;
}

/* 'learn COLLECTIVE NPROCS LAYOUT LOW HIGH CANDIDATE,...' (after the word): 0, else 1 */
static int parse_learn(const char *line, entry *e) {
    char word[32], layout[4096], list[256];
    *e = (entry){.learn = 1, .schedule = -1};
    if (sscanf(line, "%31s %d %4095s %lld %lld %255s", word, &e->nprocs, layout, &e->low, &e->high, list) != 6 ||
        (e->collective = collective_named(word)) < 0 || e->nprocs < 1 || e->low < 0)
        return 1;
    for (char *at = list, *stop; *at && e->ncandidates < LEARN_ARMS - 1; at = *stop ? stop + 1 : stop) {
        e->candidates[e->ncandidates++] = (int)strtol(at, &stop, 10);
        if (stop == at || (*stop && *stop != ',') || e->candidates[e->ncandidates - 1] < -1) return 1;
    }
    return e->ncandidates < 1 || parse_layout(layout, e->nprocs, &e->layout);
}

/* a learned line's series: 'live:' or 'dropped:', then values joined by commas or '-' (none); 0, else 1 */
static int parse_series(char *word, int *live, learn_series *s) {
    char *values = strchr(word, ':');
    if (!values) return 1;
    *values++ = 0;
    *live = strcmp(word, "live") == 0;
    if (!*live && strcmp(word, "dropped") != 0) return 1;
    if (strcmp(values, "-") == 0) return 0;
    for (char *at = values, *stop; *at; at = *stop ? stop + 1 : stop) {
        double value = strtod(at, &stop);
        if (stop == at || (*stop && *stop != ',') || learn_push(s, value)) return 1;
    }
    return 0;
}

/* 'learned COLLECTIVE NPROCS LAYOUT LOW HIGH STATE CHOICE CALLS EXPLORED REVISITED COST LIBRARY SERIES...'
   (after the word; written by learned_line): 0, else 1 */
int parse_learned(char *line, learned_t *k) {
    char word[32], layout[4096], state[32];
    int used = 0, arms = 0, live;
    learner *l = &k->l;
    *k = (learned_t){0};
    if (sscanf(line, "%31s %d %4095s %lld %lld %31s %d %lld %lld %lld %lf %n", word, &k->nprocs, layout, &k->low,
               &k->high, state, &l->choice, &l->calls, &l->explored, &l->revisited, &l->cost, &used) != 11 ||
        (k->collective = collective_named(word)) < 0 || k->nprocs < 1 ||
        parse_layout(layout, k->nprocs, &k->layout))
        return 1;
    for (l->state = 0; l->state < LEARN_STATES && strcmp(state, learn_state_name[l->state]); l->state++) continue;
    char *save = NULL;
    for (char *w = strtok_r(line + used, " ", &save); w; w = strtok_r(NULL, " ", &save), arms++)
        if (arms >= LEARN_ARMS || parse_series(w, &live, arms ? &l->ratio[arms] : &l->library)) return 1;
        else l->live[arms] = live;
    l->narms = arms, l->warmed = 1;
    /* the first communicator's share (learning_of gives each its own), halved after a give-back; a line read with
       none would never choose (its level 0) */
    l->givebacks = l->state == LEARN_GIVEN_BACK, l->share = learn_share_of(1) / (1 + l->givebacks);
    l->gap = l->state == LEARN_EXPLORING ? 0 : LLONG_MAX; /* a choice's: learning_of, which knows the settings */
    return l->state == LEARN_STATES || arms < 2 || l->choice < 0 || l->choice >= arms;
}

/* e appended to d's entries: 0, else 1 (out of memory: its layout freed) */
static int add_entry(deploy_t *d, entry e) {
    entry *more = realloc(d->entries, sizeof(entry) * (size_t)(d->nentries + 1));
    if (!more) return free(e.layout), 1;
    d->entries = more;
    d->entries[d->nentries++] = e;
    return 0;
}

/* the lines between the header and the schedules */
static int parse_entries(char **at, char *end, deploy_t *d, const char *library, char *error, size_t room) {
    char word[32], layout[4096];
    long line = 1;
    while (*at < end) {
        char *next = memchr(*at, '\n', (size_t)(end - *at));
        if (!next) return fail(error, room, "line %ld is cut", line + 1);
        *next = 0;
        line++;
        if (strncmp(*at, "library ", 8) == 0) {
            if (strcmp(*at + 8, library) != 0)
                return fail(error, room, "it was made for %s; this program runs %s", *at + 8, library);
        } else if (strncmp(*at, "entry ", 6) == 0) {
            entry e = {0};
            int got = sscanf(*at + 6, "%31s %d %4095s %lld %lld %d", word, &e.nprocs, layout, &e.low, &e.high,
                             &e.schedule);
            e.collective = strcmp(word, "alltoall") == 0 ? ALLTOALL : strcmp(word, "alltoallv") == 0 ? ALLTOALLV : -1;
            if (got != 6 || e.collective < 0 || e.nprocs < 1 || e.low < 0 || parse_layout(layout, e.nprocs, &e.layout))
                return fail(error, room, "line %ld: an entry line is 'entry COLLECTIVE NPROCS LAYOUT LOW HIGH "
                            "SCHEDULE'", line);
            if (add_entry(d, e)) return fail(error, room, "out of memory");
        } else if (strncmp(*at, "learn ", 6) == 0) {
            entry e;
            if (parse_learn(*at + 6, &e))
                return fail(error, room, "line %ld: a learn line is 'learn alltoall|alltoallv NPROCS LAYOUT LOW "
                            "HIGH CANDIDATE,...' (schedules, -1: the library's own)", line);
            if (add_entry(d, e)) return fail(error, room, "out of memory");
        } else if (strncmp(*at, "learned ", 8) == 0) {
            learned_t k;
            int bad = parse_learned(*at + 8, &k);
            learned_t *more = bad ? NULL : realloc(d->learned, sizeof(learned_t) * (size_t)(d->nlearned + 1));
            if (!more) {
                free(k.layout), learn_free(&k.l);
                return fail(error, room, "line %ld: a learned line is as liba2a writes it (A2A_LEARN_OUT), or it was "
                            "altered", line);
            }
            d->learned = more;
            d->learned[d->nlearned++] = k;
        } else if (strncmp(*at, "schedule ", 9) == 0) {
            *next = '\n';
            return 0;
        } else if (strncmp(*at, "unverified ", 11) == 0) {
            int *pair = d->unverified[d->nunverified < 32 ? d->nunverified : 31];
            if (sscanf(*at + 11, "%d %d", &pair[0], &pair[1]) != 2)
                return fail(error, room, "line %ld: an unverified line is 'unverified NPROCS MEASURED'", line);
            d->nunverified += d->nunverified < 32;
        } else if (strncmp(*at, "from ", 5) != 0 && strncmp(*at, "verified ", 9) != 0) {
            return fail(error, room, "line %ld: '%.40s' is not a deploy line", line, *at);
        }
        *at = next + 1;
    }
    return 0;
}

static int parse_schedules(char *at, char *end, deploy_t *d, char *error, size_t room) {
    char name[128];
    while (at < end) {
        int index, used = 0;
        long length;
        if (sscanf(at, "schedule %d %127s %ld%n", &index, name, &length, &used) != 3 || index != d->nschedules ||
            at[used] != '\n' || length < 0 || length > end - (at + used + 1))
            return fail(error, room, "schedule %d: its line is not 'schedule INDEX NAME LENGTH' or it is cut",
                        d->nschedules);
        at += used + 1;
        a2ax_schedule **more = realloc(d->schedules, sizeof *more * (size_t)(d->nschedules + 1));
        char (*names)[128] = more ? realloc(d->names, sizeof *names * (size_t)(d->nschedules + 1)) : NULL;
        if (more) d->schedules = more;
        if (!more || !names) return fail(error, room, "out of memory");
        d->names = names;
        char why[400];
        if (a2ax_parse(at, (size_t)length, &d->schedules[d->nschedules], why, sizeof why))
            return fail(error, room, "schedule %d (%s): %s", index, name, why);
        snprintf(d->names[d->nschedules++], sizeof *names, "%s", name);
        at += length;
    }
    for (int i = 0; i < d->nentries; i++) {
        entry *e = &d->entries[i];
        for (int j = -1; j < e->ncandidates; j++) {
            int k = j < 0 ? e->schedule : e->candidates[j];
            if (k >= d->nschedules || (k >= 0 && a2ax_nprocs(d->schedules[k]) != e->nprocs))
                return fail(error, room, "an entry for %d ranks names schedule %d, which is not one for %d ranks",
                            e->nprocs, k, e->nprocs);
        }
    }
    return 0;
}

int read_deploy(const char *path, const char *library, deploy_t **out, char *error, size_t room) {
    static const char magic[] = "a2a-deploy ";
    *out = NULL;
    FILE *file = fopen(path, "rb");
    if (!file) return fail(error, room, "it cannot be opened (%s)", strerror(errno));
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    rewind(file);
    char *text = length > 0 ? malloc((size_t)length + 1) : NULL;
    int bad = !text || fread(text, 1, (size_t)length, file) != (size_t)length;
    fclose(file);
    if (bad) {
        free(text);
        return fail(error, room, "it cannot be read, or it is empty");
    }
    text[length] = 0;
    char *end = NULL;
    for (char *p = text + length - 1; p > text && !end; p--)
        if (p[-1] == '\n' && text + length - p >= 4 && memcmp(p, "end ", 4) == 0) end = p;
    long version = strncmp(text, magic, sizeof magic - 1) == 0 ? strtol(text + sizeof magic - 1, NULL, 10) : -1;
    char stated[17] = {0}, computed[17];
    if (end)
        snprintf(computed, sizeof computed, "%016llx",
                 (unsigned long long)a2ax_fnv(text, (size_t)(end - text), A2AX_FNV_BASIS));
    deploy_t *d = calloc(1, sizeof *d);
    if (version < 0) bad = fail(error, room, "not a deploy file (it does not begin 'a2a-deploy')");
    else if (version != DEPLOY_VERSION)
        bad = fail(error, room, "deploy format version %ld; this library reads %d", version, DEPLOY_VERSION);
    else if (!end || text[length - 1] != '\n') bad = fail(error, room, "it has no 'end' line (truncated)");
    else if (sscanf(end + 4, "%16s", stated) != 1 || strcmp(stated, computed) != 0)
        bad = fail(error, room, "checksum %s does not match its contents (%s): altered or cut", stated, computed);
    else if (!d || !(d->text = malloc((size_t)length + 1))) bad = fail(error, room, "out of memory");
    if (!bad) memcpy(d->text, text, (size_t)length + 1), d->length = length; /* parsing writes into text */
    char *at = bad ? NULL : strchr(text, '\n') + 1;
    bad = bad || parse_entries(&at, end, d, library, error, room) || parse_schedules(at, end, d, error, room);
    free(text);
    if (bad) {
        free_deploy(d);
        return 1;
    }
    *out = d;
    return 0;
}
