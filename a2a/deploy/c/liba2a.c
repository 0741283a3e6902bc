/* liba2a: the chosen all-to-all schedules inside any MPI program, through MPI's profiling interface (PMPI).
 *
 * Put in front of the MPI library with LD_PRELOAD, it intercepts MPI_Alltoall and MPI_Alltoallv (and their
 * large-count _c forms where the library has them):
 *   A2A_DEPLOY=FILE      a deploy file (`python -m bench deploy`): a call it covers (the communicator's size and node
 *                        layout, predefined contiguous datatypes, the size range) runs the file's schedule in the
 *                        executor (executor.c); every other call goes to the MPI library untouched
 *   A2A_DEPLOY_REPORT=1  at MPI_Finalize rank 0 prints the calls seen, served per schedule, passed through per reason
 *   A2A_RECORD=DIR       at MPI_Finalize, what the program exchanged: one JSON line per communicator and call
 *                        signature (a2a/deploy/recorded.py reads them), written by the communicator's rank 0; the
 *                        folder is made (parents too) and checked at MPI_Init, and a recording that cannot be written
 *                        is said there in one line on rank 0 and not made (the program runs on)
 * The Fortran bindings of the same calls and of MPI_Init(_thread) and MPI_Finalize (mpif.h and `use mpi`: mpi_alltoall_
 * and its name variants; `use mpi_f08`: mpi_alltoall_f08_) are intercepted too, their handles converted (MPI_Type_f2c,
 * MPI_Comm_f2c) and MPI_IN_PLACE recognised, so Fortran programs are served where the library's Fortran calls PMPI_*
 * directly (Open MPI) as where it calls MPI_* (MPICH). It calls the program's MPI library, not the one it was built
 * with (it links none where the handles are numbers, MPICH's), and at MPI_Init it checks that library is the family and
 * version it was built for (and that the optional entry points the executor uses are there): otherwise it says so in
 * one line and passes every call through.
 * Without them it counts calls and does nothing else. A deploy file that cannot be used is refused at MPI_Init in
 * one line on rank 0 and every call passes through; one that serves nothing on MPI_COMM_WORLD says so there too.
 * MPI_Ialltoall(v) and MPI_Alltoall_init are served as the blocking calls are where the executor progresses inside
 * MPI (MPICH's MPIX_Async: A2AX_MPI_PROGRESS), else passed through (counted).
 *
 * The choice is made on each rank from its own arguments, so ranks must call with the same kinds of arguments
 * (MPI lets one rank pass 4 x MPI_INT where another passes one contiguous type of 4 ints: such a call would be
 * served on one and passed through on the other).
 */
#define _GNU_SOURCE /* dladdr, RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../execute/c/executor.h" /* the executor it runs schedules with (a2a/execute/c) */
#include "learn.h"                      /* the learners of `learn` lines */

#define EXPORT __attribute__((visibility("default")))
#define TEXT(x) #x
#define NUMBER(x) TEXT(x)

/* the MPI library it is built for: its family and version, as MPI_Get_library_version names them */
#if defined(OPEN_MPI)
#define BUILT_FAMILY "Open MPI"
#define BUILT_VERSION NUMBER(OMPI_MAJOR_VERSION) "." NUMBER(OMPI_MINOR_VERSION) "." NUMBER(OMPI_RELEASE_VERSION)
#elif defined(I_MPI_VERSION)
#define BUILT_FAMILY "Intel MPI"
#define BUILT_VERSION "" /* its library string names another version than its header: the family is checked */
#elif defined(MPICH_VERSION)
#define BUILT_FAMILY "MPICH"
#define BUILT_VERSION MPICH_VERSION
#else
#define BUILT_FAMILY "unknown"
#define BUILT_VERSION ""
#endif
#define DEPLOY_VERSION 1
#define SLOTS 8          /* prepared plans kept per communicator */
#define NAMED 4          /* predefined datatypes whose size is kept */
#define RECORD_LIMIT 64  /* distinct signatures (sizes, count matrices) recorded per communicator and collective */

enum collective { ALLTOALL, ALLTOALLV, COLLECTIVES };
static const char *const collective_name[COLLECTIVES] = {"alltoall", "alltoallv"};

enum reason { NO_FILE, EMPTY, INTERCOMM, IN_PLACE, DATATYPE, SIGNATURE, COLLECTIVE, NPROCS, LAYOUT, SIZE, LIBRARY,
              PREPARE, NONBLOCKING, PERSISTENT, PRIVATE_COPY, LEARNING, LEARNING_BLOCKING, REASONS };
static const char *const reason_text[REASONS] = {
    "no deploy file", "nothing to move (0 bytes)", "intercommunicator", "MPI_IN_PLACE",
    "derived or non-contiguous datatype",
    "send and receive sizes differ", "the file has no entry for this collective", "communicator size not in the file",
    "node layout not in the file", "size not in the file", "the file keeps the library's choice",
    "the executor could not prepare it", "non-blocking form (the executor has no progress hook here)",
    "persistent form (the executor has no progress hook here)",
    "first non-blocking call on the communicator (its private copy is being made)",
    "learning: the library's own (its turn, or held)", "learning serves the blocking form only"};

/* an entry line (one schedule, or -1: the library's) or a learn line (candidates: schedules, -1: the library's under
   another name, an A/A control) */
typedef struct {
    int collective, nprocs, *layout;
    long long low, high;
    int schedule, learn, ncandidates, candidates[LEARN_ARMS - 1];
} entry;

/* a learned line: a size class's learner as a run left it */
typedef struct { int collective, nprocs, *layout; long long low, high; learner l; } learned_t;

typedef struct {
    int nentries, nschedules, nunverified, nlearned;
    int unverified[32][2]; /* process counts the decision never measured, and the count whose table they took */
    entry *entries;
    learned_t *learned;
    a2ax_schedule **schedules;
    char (*names)[128];
    char *text; /* the file as read: a learned file is written from it */
    long length;
} deploy_t;

/* a size class of a learn entry on a communicator: its learner, and the arm a library visit stands for */
typedef struct learning {
    const entry *e;
    long long low, high;
    int arm;
    learner l;
    long long before[3]; /* calls, exploring and revisiting calls of earlier runs (a learned line's) */
    struct comm_state *c;
    struct learning *next;
} learning;

typedef struct {
    a2ax_plan *plan;
    int schedule;
    const void *send;
    void *recv;
    MPI_Aint block, *blocks; /* alltoall: block bytes; alltoallv: send offsets, lengths, receive offsets, lengths */
    unsigned long used;
} slot_t;

typedef struct signature {
    int collective, type_bytes;
    char sendtype[64], recvtype[64];
    long long count, calls;
    double seconds;
    uint64_t matrix_id;
    long long *matrix; /* nprocs x nprocs elements, on rank 0; NULL: beyond the limit */
    int beyond;
    struct signature *next;
} signature;

typedef struct comm_state {
    MPI_Comm comm, own; /* the program's, and our duplicate (MPI_COMM_NULL where nothing runs on it) */
    int size, rank, id, freed, ncandidates, kept[COLLECTIVES];
    const entry **candidates;
    slot_t slots[SLOTS];
    unsigned long clock;
    signature *signatures;
    learning *learnings; /* kept after the communicator is freed, until MPI_Finalize reports and writes them */
    struct comm_state *next;
} comm_state;

typedef struct { MPI_Datatype type; MPI_Count size; } named_type;

#define FORTRAN_MARKS 6 /* names of Fortran's MPI_IN_PLACE (and MPI_BOTTOM) among the libraries */

/* the library's one state per process: what MPI_Init found, the counts, every communicator met */
static struct {
    int ready, began, refused, fortran, keyval, report, recording, ncomms, marks_looked, marks_known;
    void *in_place[FORTRAN_MARKS], *bottom[FORTRAN_MARKS]; /* Fortran's, looked up at its first all-to-all */
    deploy_t *deploy;
    learn_settings learn;
    char path[1024], record[1024], job[64], learn_out[1024];
    long long seen[COLLECTIVES], passed[COLLECTIVES][REASONS], *served; /* served: per collective, per schedule */
    comm_state *states;
    named_type named[NAMED];
    unsigned next_named;
} the;

static int fail(char *error, size_t room, const char *format, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *error, size_t room, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, room, format, args);
    va_end(args);
    return 1;
}

/* ---- the deploy file (written by a2a/deploy/file.py, which describes it) ---- */

static const char *family(const char *version) {
    if (strstr(version, "Open MPI")) return "Open MPI";
    if (strstr(version, "Intel")) return "Intel MPI";
    if (strstr(version, "MPICH")) return "MPICH";
    return "unknown";
}

static void free_deploy(deploy_t *d) {
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
        collective_named(word) != ALLTOALL || e->nprocs < 1 || e->low < 0)
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
static int parse_learned(char *line, learned_t *k) {
    char word[32], layout[4096], state[32];
    int used = 0, arms = 0, live;
    learner *l = &k->l;
    *k = (learned_t){0};
    if (sscanf(line, "%31s %d %4095s %lld %lld %31s %d %lld %lld %lld %lf %n", word, &k->nprocs, layout, &k->low,
               &k->high, state, &l->choice, &l->calls, &l->explored, &l->revisited, &l->cost, &used) != 11 ||
        (k->collective = collective_named(word)) != ALLTOALL || k->nprocs < 1 ||
        parse_layout(layout, k->nprocs, &k->layout))
        return 1;
    for (l->state = 0; l->state < LEARN_STATES && strcmp(state, learn_state_name[l->state]); l->state++) continue;
    char *save = NULL;
    for (char *w = strtok_r(line + used, " ", &save); w; w = strtok_r(NULL, " ", &save), arms++)
        if (arms >= LEARN_ARMS || parse_series(w, &live, arms ? &l->ratio[arms] : &l->library)) return 1;
        else l->live[arms] = live;
    l->narms = arms, l->warmed = 1;
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
                return fail(error, room, "line %ld: a learn line is 'learn alltoall NPROCS LAYOUT LOW HIGH "
                            "CANDIDATE,...' (schedules, -1: the library's own; learning serves MPI_Alltoall only)",
                            line);
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

static int read_deploy(const char *path, const char *library, deploy_t **out, char *error, size_t room) {
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

/* ---- communicators: what the file serves on each, its duplicate and prepared plans, what it exchanged ---- */

static void free_plans(comm_state *c) {
    for (int i = 0; i < SLOTS; i++) {
        a2ax_free(c->slots[i].plan);
        free(c->slots[i].blocks);
        c->slots[i] = (slot_t){0};
    }
}

static int forget(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    comm_state *c = value;
    free_plans(c);
    if (c->own != MPI_COMM_NULL) PMPI_Comm_free(&c->own);
    free(c->candidates);
    c->candidates = NULL;
    c->ncandidates = 0;
    c->freed = 1; /* what it recorded stays until MPI_Finalize writes it */
    return MPI_SUCCESS;
}

/* each rank's node, numbered in order of the nodes' lowest ranks (collective on c->own) */
static int *layout_of(comm_state *c) {
    MPI_Comm local;
    int lowest, *node = malloc(sizeof(int) * (size_t)c->size), *first = malloc(sizeof(int) * (size_t)c->size);
    int ok = node && first, all = 0;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->own) != MPI_SUCCESS || !all ||
        PMPI_Comm_split_type(c->own, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local) != MPI_SUCCESS) {
        free(node), free(first);
        return NULL;
    }
    ok = PMPI_Allreduce(&c->rank, &lowest, 1, MPI_INT, MPI_MIN, local) == MPI_SUCCESS;
    PMPI_Comm_free(&local);
    if (!ok || PMPI_Allgather(&lowest, 1, MPI_INT, first, 1, MPI_INT, c->own) != MPI_SUCCESS) {
        free(node), free(first);
        return NULL;
    }
    int nodes = 0;
    for (int r = 0; r < c->size; r++) node[r] = first[r] == r ? nodes++ : node[first[r]];
    free(first);
    return node;
}

/* the state of a communicator, made at its first all-to-all (collective: every rank makes the same choices), or NULL
   where it could not be made (on every rank alike: memory, or an MPI call that failed) */
static comm_state *state_of(MPI_Comm comm) {
    comm_state *c;
    int found, size, sized = 0, laid = 0;
    if (PMPI_Comm_get_attr(comm, the.keyval, &c, &found) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return NULL;
    if (found) return c;
    for (int i = 0; the.deploy && i < the.deploy->nentries; i++)
        if (the.deploy->entries[i].nprocs == size) sized++, laid += the.deploy->entries[i].layout != NULL;
    c = calloc(1, sizeof *c);
    const entry **candidates = calloc((size_t)sized + 1, sizeof *candidates);
    int ok = c && candidates, all = ok;
    if (sized || the.recording) { /* nothing collective happens on it otherwise */
        if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    }
    if (!all) {
        free(c), free(candidates);
        return NULL;
    }
    c->comm = comm;
    c->own = MPI_COMM_NULL;
    c->size = size;
    c->candidates = candidates;
    PMPI_Comm_rank(comm, &c->rank);
    if (sized || the.recording) { /* a copy of the group, not MPI_Comm_dup: the program's attributes stay its own */
        MPI_Group group;
        ok = PMPI_Comm_group(comm, &group) == MPI_SUCCESS;
        ok = ok && PMPI_Comm_create(comm, group, &c->own) == MPI_SUCCESS && c->own != MPI_COMM_NULL;
        if (ok) PMPI_Group_free(&group);
        if (!ok) {
            free(c), free(candidates);
            return NULL;
        }
    }
    c->id = the.ncomms++;
    int *layout = laid ? layout_of(c) : NULL; /* NULL where it could not be found: no entry for a layout serves */
    for (int i = 0; sized && i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        if (e->nprocs == c->size &&
            (!e->layout || (layout && memcmp(e->layout, layout, sizeof(int) * (size_t)c->size) == 0)))
            c->candidates[c->ncandidates++] = e;
    }
    free(layout);
    c->next = the.states;
    the.states = c;
    PMPI_Comm_set_attr(comm, the.keyval, c);
    return c;
}

/* the entry serving `bytes` of a collective on c, or why none */
static const entry *chosen(const comm_state *c, int collective, long long bytes, int *why) {
    int sized = 0;
    for (int i = 0; i < c->ncandidates; i++) {
        const entry *e = c->candidates[i];
        if (e->collective != collective) continue;
        sized = 1;
        if (bytes >= e->low && (e->high < 0 || bytes <= e->high)) {
            *why = LIBRARY;
            return e->schedule >= 0 || e->learn ? e : NULL;
        }
    }
    int any_size = 0, any = 0;
    for (int i = 0; !sized && the.deploy && i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        any |= e->collective == collective;
        any_size |= e->nprocs == c->size && e->collective == collective;
    }
    *why = sized ? SIZE : any_size ? LAYOUT : any ? NPROCS : COLLECTIVE;
    return NULL;
}

/* a plan of schedule k on c's private communicator bound to these buffers (local, no collective), or NULL */
static a2ax_plan *prepared(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks) {
    char error[512];
    a2ax_plan *plan = NULL;
    const a2ax_schedule *schedule = the.deploy->schedules[k];
    int bad;
    if (blocks) {
        int n = c->size;
        bad = a2ax_bind(schedule, c->own, send, blocks, blocks + n, recv, blocks + 2 * n, blocks + 3 * n, -1, &plan,
                        error, sizeof error);
    } else {
        MPI_Aint *at = malloc(sizeof(MPI_Aint) * 2 * (size_t)c->size);
        for (int i = 0; at && i < c->size; i++) at[i] = i * block, at[c->size + i] = block;
        bad = !at || a2ax_bind(schedule, c->own, send, at, at + c->size, recv, at, at + c->size, block, &plan, error,
                               sizeof error);
        free(at);
    }
    return bad ? NULL : plan;
}

/* a plan of schedule k bound to these buffers: kept from an earlier call, else prepared; a plan with an exchange in
   flight (a non-blocking call's) is neither reused nor replaced: NULL when every slot holds one */
static a2ax_plan *bound(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks) {
    size_t bytes = 4 * sizeof(MPI_Aint) * (size_t)c->size;
    slot_t *oldest = NULL;
    for (int i = 0; i < SLOTS; i++) {
        slot_t *s = &c->slots[i];
        if (s->plan && a2ax_busy(s->plan)) continue;
        if (s->plan && s->schedule == k && s->send == send && s->recv == recv && s->block == block &&
            (blocks ? s->blocks && memcmp(s->blocks, blocks, bytes) == 0 : !s->blocks)) {
            s->used = ++c->clock;
            return s->plan;
        }
        if (!oldest || s->used < oldest->used) oldest = s;
    }
    if (!oldest) return NULL;
    a2ax_free(oldest->plan);
    free(oldest->blocks);
    *oldest = (slot_t){0};
    a2ax_plan *plan = prepared(c, k, send, recv, block, blocks);
    if (!plan) return NULL;
    *oldest = (slot_t){plan, k, send, recv, block, NULL, ++c->clock};
    if (blocks && (oldest->blocks = malloc(bytes)) != NULL) memcpy(oldest->blocks, blocks, bytes);
    if (blocks && !oldest->blocks) {
        a2ax_free(plan);
        *oldest = (slot_t){0};
        return NULL;
    }
    return plan;
}

/* a predefined datatype whose bytes lie contiguous: its size, else 0 (the last few answers kept: a predefined
   type is never freed, so its handle always means the same type) */
static MPI_Count plain_size(MPI_Datatype type) {
    if (type == MPI_DATATYPE_NULL) return 0; /* an in-place call's send type may be null: nothing to ask of it */
    for (int i = 0; i < NAMED; i++)
        if (the.named[i].size && the.named[i].type == type) return the.named[i].size;
    int integers, addresses, types, combiner;
    MPI_Count size, lb, extent;
    if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS ||
        combiner != MPI_COMBINER_NAMED || PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS)
        return 0; /* not known to be plain: the call passes through */
    size = lb == 0 && extent == size ? size : 0;
    the.named[the.next_named++ % NAMED] = (named_type){type, size};
    return size;
}

static int passed(int collective, int reason) {
    the.passed[collective][reason]++;
    return 0;
}

/* ---- learning: a learn entry's size classes, each a learner over the calls of its communicator ---- */

static int same_layout(const int *a, const int *b, int nprocs) {
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

/* the learning of the size class of `bytes` in e's range on c: a power of two to the next, within the range; made at
   its first call, from the file's learned line where it has one (every rank alike: the same file, the same calls) */
static learning *learning_of(comm_state *c, const entry *e, long long bytes) {
    long long low = 1;
    while (low <= bytes / 2) low *= 2;
    long long high = 2 * low - 1;
    low = low > e->low ? low : e->low, high = e->high >= 0 && e->high < high ? e->high : high;
    for (learning *g = c->learnings; g; g = g->next)
        if (g->e == e && g->low == low) return g;
    learning *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    *g = (learning){.e = e, .low = low, .high = high, .c = c};
    const learned_t *k = NULL;
    for (int i = 0; i < the.deploy->nlearned && !k; i++) {
        const learned_t *m = &the.deploy->learned[i];
        if (m->collective == e->collective && m->nprocs == e->nprocs && m->low == low &&
            same_layout(m->layout, e->layout, e->nprocs) && m->l.narms == 1 + e->ncandidates)
            k = m;
    }
    if (!k || copied(&g->l, &k->l))
        learn_init(&g->l, e->ncandidates, 0x5eed0000ULL + (unsigned long long)low * 31 + (unsigned long long)c->size);
    else if (g->l.state == LEARN_CHOSEN)
        g->l.gap = the.learn.revisit; /* a choice from an earlier run: revisited as if just made */
    g->before[0] = g->l.calls, g->before[1] = g->l.explored, g->before[2] = g->l.revisited;
    learning **last = &c->learnings; /* in the order first met: the report reads as the program ran */
    while (*last) last = &(*last)->next;
    return *last = g;
}

/* a block's visit took `seconds` on this rank; at the block's end the slowest rank's times are agreed, on the
   communicator's private copy, and the learner decides from them (every rank reaches this at the same call) */
static void visited(learning *g, int arm, double seconds) {
    if (!learn_took(&g->l, arm, seconds)) return;
    int n;
    double *times = learn_times(&g->l, &n);
    if (PMPI_Allreduce(MPI_IN_PLACE, times, n, MPI_DOUBLE, MPI_MAX, g->c->own) != MPI_SUCCESS) {
        g->l.state = LEARN_UNDECIDED, g->l.gap = LLONG_MAX, g->l.choice = 0; /* MPI said why; the library's serves */
        return;
    }
    learn_decide(&g->l, &the.learn);
}

/* a learn entry's call: the arm its learner names runs, timed where it is a block's visit; 1 where a schedule ran
   (its result in *result), 0 where the library's own is to run (*timing: time it and give it to visited) */
static int learned_call(comm_state *c, const entry *e, const void *send, void *recv, MPI_Count bytes, int *result,
                        learning **timing) {
    learning *g = learning_of(c, e, bytes);
    if (!g) return passed(ALLTOALL, PREPARE);
    int timed, arm = learn_next(&g->l, &timed), k = arm ? e->candidates[arm - 1] : -1;
    a2ax_plan *plan = k >= 0 ? bound(c, k, send, recv, (MPI_Aint)bytes, NULL) : NULL;
    if (!plan) { /* the library's own, or a candidate that could not be prepared (out of memory): it runs there */
        if (timed) *timing = g, g->arm = arm;
        return passed(ALLTOALL, k >= 0 ? PREPARE : LEARNING);
    }
    double start = PMPI_Wtime();
    *result = a2ax_run(plan) ? MPI_ERR_OTHER : MPI_SUCCESS;
    double seconds = PMPI_Wtime() - start;
    the.served[ALLTOALL * the.deploy->nschedules + k]++;
    if (timed) visited(g, arm, seconds);
    return 1;
}

/* run the call with its schedule if the file covers it (1, its result in *result), else 0: the caller passes it on
   (and where *timing is set, times it for a learner: visited) */
static int served(int collective, const void *send, void *recv, MPI_Count send_bytes, MPI_Count recv_bytes,
                  MPI_Datatype sendtype, MPI_Datatype recvtype, const MPI_Aint *blocks, MPI_Comm comm, int *result,
                  learning **timing) {
    int inter, why;
    if (!the.deploy) return passed(collective, NO_FILE);
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) /* not a communicator it can use: the library's */
        return passed(collective, INTERCOMM);
    comm_state *c = state_of(comm);
    if (!c) return passed(collective, PREPARE);
    if (send == MPI_IN_PLACE) return passed(collective, IN_PLACE);
    if (collective == ALLTOALLV && !blocks) return passed(collective, PREPARE); /* no memory for its blocks */
    if (!plain_size(sendtype) || !plain_size(recvtype)) return passed(collective, DATATYPE);
    if (collective == ALLTOALL && send_bytes == 0) return passed(collective, EMPTY); /* alike on every rank */
    if (collective == ALLTOALL && send_bytes != recv_bytes) return passed(collective, SIGNATURE);
    const entry *e = chosen(c, collective, send_bytes, &why);
    if (!e) return passed(collective, why);
    if (e->learn) return learned_call(c, e, send, recv, send_bytes, result, timing);
    a2ax_plan *plan = bound(c, e->schedule, send, recv, (MPI_Aint)send_bytes, blocks);
    if (!plan) return passed(collective, PREPARE);
    *result = a2ax_run(plan) ? MPI_ERR_OTHER : MPI_SUCCESS;
    the.served[collective * the.deploy->nschedules + e->schedule]++;
    return 1;
}

/* ---- recording what the program exchanged ---- */

static void type_name(MPI_Datatype type, char *name) {
    int length = 0;
    name[0] = 0;
    if (plain_size(type)) PMPI_Type_get_name(type, name, &length);
    if (!name[0]) strcpy(name, "derived");
}

static signature *signature_for(comm_state *c, int collective, MPI_Datatype st, MPI_Datatype rt, long long count,
                                uint64_t matrix_id) {
    char sendtype[64], recvtype[64];
    type_name(st, sendtype);
    type_name(rt, recvtype);
    signature *beyond = NULL;
    for (signature *s = c->signatures; s; s = s->next) {
        if (s->collective != collective || strcmp(s->sendtype, sendtype) || strcmp(s->recvtype, recvtype)) continue;
        if (s->beyond) beyond = s;
        else if (s->count == count && s->matrix_id == matrix_id) return s;
    }
    if (beyond && c->kept[collective] >= RECORD_LIMIT) return beyond;
    signature *s = calloc(1, sizeof *s);
    MPI_Count size;
    if (!s || PMPI_Type_size_x(st, &size) != MPI_SUCCESS) {
        free(s);
        return NULL;
    }
    *s = (signature){collective, (int)size, "", "", count, 0, 0.0, matrix_id, NULL, c->kept[collective] >= RECORD_LIMIT,
                     c->signatures};
    strcpy(s->sendtype, sendtype);
    strcpy(s->recvtype, recvtype);
    c->kept[collective] += !s->beyond;
    c->signatures = s;
    return s;
}

static void recorded(MPI_Comm comm, int collective, MPI_Datatype st, MPI_Datatype rt, long long count,
                     const long long *row, double seconds) {
    int inter;
    comm_state *c;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter || !(c = state_of(comm))) return;
    uint64_t mine[2] = {0, 0}, sum[2] = {0, 0};
    if (collective == ALLTOALLV) { /* one id for the whole matrix, the same on every rank; and whether a rank lacks
                                      its row (no memory for it): then no rank records the call */
        mine[0] = row ? a2ax_fnv(row, sizeof(long long) * (size_t)c->size,
                                 a2ax_fnv(&c->rank, sizeof c->rank, A2AX_FNV_BASIS))
                      : 0;
        mine[1] = !row;
        if (PMPI_Allreduce(mine, sum, 2, MPI_UINT64_T, MPI_SUM, c->own) != MPI_SUCCESS || sum[1]) return;
    }
    signature *s = signature_for(c, collective, st, rt, count, sum[0]);
    if (collective == ALLTOALLV && (!s || (!s->beyond && s->calls == 0))) { /* a new matrix, gathered once */
        long long *matrix = c->rank == 0 ? malloc(sizeof(long long) * (size_t)c->size * (size_t)c->size) : NULL;
        int ok = s && (c->rank != 0 || matrix), all = 0; /* every rank gathers, or none */
        if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->own) != MPI_SUCCESS || !all ||
            PMPI_Gather(row, c->size, MPI_LONG_LONG, matrix, c->size, MPI_LONG_LONG, 0, c->own) != MPI_SUCCESS) {
            free(matrix);
            if (s) { /* every rank forgets the new signature alike, so their next calls still agree */
                c->signatures = s->next;
                c->kept[collective]--;
                free(s);
            }
            return;
        }
        s->matrix = matrix;
    }
    if (!s) return;
    s->calls++;
    s->seconds += seconds;
}

static void write_records(void) {
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    FILE *out = NULL;
    for (comm_state *c = the.states; c; c = c->next) {
        for (signature *s = c->signatures; s && c->rank == 0; s = s->next) {
            if (!out) {
                char path[1200];
                snprintf(path, sizeof path, "%s/record.%s.rank%d.jsonl", the.record, the.job, rank);
                if (!(out = fopen(path, "w"))) {
                    fprintf(stderr, "a2a: A2A_RECORD: cannot write %s (%s)\n", path, strerror(errno));
                    return;
                }
            }
            fprintf(out, "{\"job\": \"%s\", \"writer\": %d, \"comm\": %d, \"nprocs\": %d, \"collective\": \"%s\", "
                    "\"sendtype\": \"%s\", \"recvtype\": \"%s\", \"type_bytes\": %d, ", the.job, rank, c->id,
                    c->size, collective_name[s->collective], s->sendtype, s->recvtype, s->type_bytes);
            if (s->collective == ALLTOALL)
                fprintf(out, "\"count\": %lld, \"block_bytes\": %lld, ", s->count, s->count * s->type_bytes);
            else if (s->matrix) {
                fprintf(out, "\"matrix\": [");
                for (int i = 0; i < c->size * c->size; i++)
                    fprintf(out, "%s%lld%s", i % c->size ? ", " : "[", s->matrix[i],
                            i % c->size == c->size - 1 ? (i == c->size * c->size - 1 ? "]" : "], ") : "");
                fprintf(out, "], ");
            } else
                fprintf(out, "\"matrix\": null, ");
            fprintf(out, "\"calls\": %lld, \"seconds\": %.9g", s->calls, s->seconds);
            if (s->beyond) fprintf(out, ", \"why\": \"beyond the %d distinct signatures kept\"", RECORD_LIMIT);
            fprintf(out, "}\n");
        }
    }
    if (out) fclose(out);
}

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

/* ---- MPI_Init and MPI_Finalize ---- */

/* A2A_RECORD's folder made (its parents too) and written to once: 0, else the errno that stopped it */
static int writable_folder(const char *path, int rank) {
    char part[1024], probe[1100];
    if (snprintf(part, sizeof part, "%s", path) >= (int)sizeof part) return ENAMETOOLONG;
    for (char *at = part + 1; *at; at++)
        if (*at == '/') {
            *at = 0;
            if (mkdir(part, 0777) && errno != EEXIST) return errno;
            *at = '/';
        }
    if (mkdir(part, 0777) && errno != EEXIST) return errno;
    snprintf(probe, sizeof probe, "%s/.a2a-probe-%d", part, rank);
    FILE *file = fopen(probe, "w");
    if (!file) return errno;
    fclose(file);
    remove(probe);
    return 0;
}

/* one line on rank 0 when the deploy file serves nothing on this job's MPI_COMM_WORLD (collective on it) */
static void say_what_world_gets(int rank, int size) {
    int sized = 0, laid = 0, smaller = 0, matching = 0;
    char sizes[256] = "";
    for (int i = 0; i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        sized += e->nprocs == size, laid += e->nprocs == size && e->layout, smaller += e->nprocs < size;
        int named = 0; /* each process count once, in the file's order */
        for (int j = 0; j < i; j++) named |= the.deploy->entries[j].nprocs == e->nprocs;
        size_t used = strlen(sizes);
        if (!named && used + 16 < sizeof sizes)
            snprintf(sizes + used, sizeof sizes - used, "%s%d", used ? ", " : "", e->nprocs);
    }
    comm_state world = {.comm = MPI_COMM_WORLD, .own = MPI_COMM_WORLD, .size = size, .rank = rank};
    int *layout = laid ? layout_of(&world) : NULL;
    for (int i = 0; i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        matching += e->nprocs == size && (!e->layout || memcmp(e->layout, layout, sizeof(int) * (size_t)size) == 0);
    }
    free(layout);
    if (matching || rank != 0) return;
    if (sized)
        fprintf(stderr, "a2a: A2A_DEPLOY=%s: its entries for %d ranks are for another node layout than this job's "
                "(bench deploy --ranks-per-node); all-to-alls on all %d ranks go to the MPI library\n",
                the.path, size, size);
    else if (smaller)
        fprintf(stderr, "a2a: A2A_DEPLOY=%s has no entry for this job's %d ranks (it has %s): only communicators of "
                "those sizes are served\n", the.path, size, sizes);
    else
        fprintf(stderr, "a2a: A2A_DEPLOY=%s serves nothing in this job of %d ranks (it has entries for %s ranks); "
                "every all-to-all goes to the MPI library\n", the.path, size, sizes);
}

/* the rank the launcher gave this process (0 where none says: a singleton), known without asking the MPI library */
static int launcher_rank(void) {
    static const char *const names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (getenv(names[i])) return atoi(getenv(names[i]));
    return 0;
}

/* why the MPI library this process runs is not the one liba2a was built for (its family, its version, an optional
   entry point the executor calls), else NULL */
static const char *unlike_built(const char *version, char *why, size_t room) {
    const char *at = version; /* its version: the first word after its name that begins with a digit */
    while (*at && !(*at >= '0' && *at <= '9' && at > version && strchr(" \tv:", at[-1]))) at++;
    int length = (int)strcspn(at, " \t\n,");
    if (strcmp(family(version), BUILT_FAMILY) != 0 ||
        (BUILT_VERSION[0] && (length != (int)strlen(BUILT_VERSION) || strncmp(at, BUILT_VERSION, (size_t)length))))
        snprintf(why, room, "liba2a was built for %s %s; this program runs %s %.*s", BUILT_FAMILY, BUILT_VERSION,
                 family(version), length > 32 ? 32 : length, at);
#ifdef A2AX_MPI_PROGRESS
    else if (!dlsym(RTLD_DEFAULT, "MPIX_Async_start"))
        snprintf(why, room, "this %s has no MPIX_Async_start, which liba2a was built to call", family(version));
#endif
    else
        return NULL;
    return why;
}

static int learns(const deploy_t *d) {
    for (int i = 0; i < d->nentries; i++)
        if (d->entries[i].learn) return 1;
    return 0;
}

/* the learners' settings from A2A_LEARN_CAP, A2A_LEARN_REVISIT and A2A_LEARN_OUT: 0, else 1 and why in error */
static int learn_settings_read(char *error, size_t room) {
    const char *cap = getenv("A2A_LEARN_CAP"), *revisit = getenv("A2A_LEARN_REVISIT"), *out = getenv("A2A_LEARN_OUT");
    char *stop;
    the.learn = (learn_settings){.cap = 0.05, .margin = 0.05, .alpha = 0.05, .revisit = 1000};
    if (cap && *cap && ((the.learn.cap = strtod(cap, &stop)), *stop || !(the.learn.cap > 0 && the.learn.cap <= 1)))
        return fail(error, room, "A2A_LEARN_CAP=%s; accepted: the share of the library's time exploring may cost, "
                    "above 0 and at most 1 (default 0.05)", cap);
    if (revisit && *revisit && ((the.learn.revisit = strtoll(revisit, &stop, 10)), *stop || the.learn.revisit < 1))
        return fail(error, room, "A2A_LEARN_REVISIT=%s; accepted: the calls between revisits of the library after a "
                    "choice, a whole number from 1 (default 1000)", revisit);
    if (out && *out && snprintf(the.learn_out, sizeof the.learn_out, "%s", out) >= (int)sizeof the.learn_out)
        return fail(error, room, "A2A_LEARN_OUT is longer than %zu characters", sizeof the.learn_out - 1);
    return 0;
}

/* what MPI_Init found, said where it cannot be used; once per process, whichever binding's MPI_Init came first */
static void started(void) {
    char error[600] = "", why[200], version[MPI_MAX_LIBRARY_VERSION_STRING + 8192] = "";
    int length, rank, size, local[6], all[6];
    const char *deploy = getenv("A2A_DEPLOY"), *report = getenv("A2A_DEPLOY_REPORT"), *record = getenv("A2A_RECORD");
    if (the.began++) return;
    PMPI_Get_library_version(version, &length);
    if (unlike_built(version, why, sizeof why)) { /* nothing else is asked of a library it was not built for */
        the.refused = 1;
        /* said as a refused deploy file is, where there is one (a verification launch looks for that line) */
        if (((deploy && *deploy) || (record && *record) || (report && *report)) && launcher_rank() == 0)
            fprintf(stderr, "a2a: %s%s refused: %s; every call goes to the MPI library (build liba2a for it: python "
                    "-m bench deploy --library --mpicc PATH)\n", deploy && *deploy ? "A2A_DEPLOY=" : "liba2a",
                    deploy && *deploy ? deploy : "", why);
        return;
    }
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || PMPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS)
        return;
    if (deploy && *deploy) {
        snprintf(the.path, sizeof the.path, "%s", deploy);
        if (!read_deploy(deploy, family(version), &the.deploy, error, sizeof error) && learns(the.deploy) &&
            learn_settings_read(error, sizeof error)) {
            free_deploy(the.deploy);
            the.deploy = NULL;
        }
    }
    /* every rank must make the same choices: one refusal anywhere refuses the file everywhere */
    int unwritable = record && *record ? writable_folder(record, rank) : 0;
    the.served = calloc((size_t)(COLLECTIVES * (the.deploy ? the.deploy->nschedules : 0)) + 1, sizeof(long long));
    local[0] = deploy && *deploy && !the.deploy;
    local[1] = report && strcmp(report, "0") != 0 && *report;
    local[2] = record && *record;
    local[3] = the.deploy ? the.deploy->nschedules : 0;
    local[4] = unwritable != 0;
    local[5] = !the.served || PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget, &the.keyval, NULL) != MPI_SUCCESS;
    if (PMPI_Allreduce(local, all, 6, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS || all[5]) {
        if (rank == 0) fprintf(stderr, "a2a: liba2a could not start (out of memory, or MPI refused a call); every "
                               "call goes to the MPI library\n");
        free_deploy(the.deploy);
        the.deploy = NULL;
        return;
    }
    if (all[0]) {
        if (rank == 0)
            fprintf(stderr, "a2a: A2A_DEPLOY=%s refused: %s; every all-to-all goes to the MPI library\n", the.path,
                    error[0] ? error : "another rank could not read it");
        free_deploy(the.deploy);
        the.deploy = NULL;
    }
    if (the.deploy) say_what_world_gets(rank, size);
    if (all[4] && rank == 0)
        fprintf(stderr, "a2a: A2A_RECORD=%s cannot be written (%s); nothing will be recorded\n", record,
                unwritable ? strerror(unwritable) : "another rank cannot write it");
    the.report = all[1];
    the.recording = all[2] && !all[4];
    if (the.recording) {
        snprintf(the.record, sizeof the.record, "%s", record);
        if (rank == 0) {
            time_t now = time(NULL);
            strftime(the.job, sizeof the.job, "%Y%m%d-%H%M%S", gmtime(&now));
            snprintf(the.job + strlen(the.job), sizeof the.job - strlen(the.job), "-%d", (int)getpid());
        }
        if (PMPI_Bcast(the.job, sizeof the.job, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS) the.recording = 0;
    }
    the.ready = 1;
}

/* The program's MPI library in the global scope, where this library's calls into it are looked up: liba2a links none
   where the library's handles are numbers (MPICH), and a program may load its library as a module's (mpi4py's
   extension, RTLD_LOCAL); the object that calls MPI_Init is made global with what it needs. */
static void global_library(void *caller) {
    Dl_info info;
    void *handle = dladdr(caller, &info) && info.dli_fname ? dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL)
                                                           : NULL;
    if (handle) dlclose(handle);
}

EXPORT int MPI_Init(int *argc, char ***argv) {
    global_library(__builtin_return_address(0));
    int result = PMPI_Init(argc, argv);
    if (result == MPI_SUCCESS) started();
    return result;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    global_library(__builtin_return_address(0));
    int result = PMPI_Init_thread(argc, argv, required, provided);
    if (result == MPI_SUCCESS) started();
    return result;
}

/* ---- what was learned: the report's lines, and the learned file (A2A_LEARN_OUT) ---- */

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
    double library = learn_median(&l->library, INT_MAX), spent = library * (double)l->calls, low, high;
    char range[64];
    span(range, sizeof range, g->low, g->high);
    fprintf(stderr, "  learn alltoall on %d ranks, %s: %lld calls, %lld exploring, %lld revisiting the library%s; ",
            g->c->size, range, l->calls - g->before[0], l->explored - g->before[1], l->revisited - g->before[2],
            g->before[0] ? " (this run; the file's evidence before it)" : "");
    if (l->state == LEARN_CHOSEN) {
        learn_interval(&l->ratio[l->choice], INT_MAX, learn_level(l, &the.learn), &low, &high);
        fprintf(stderr, "serves %s, %.2fx the library's time (median of %d rounds, interval %.2f-%.2fx)",
                arm_name(g->e, l->choice), exp(learn_median(&l->ratio[l->choice], INT_MAX)), l->ratio[l->choice].count,
                exp(low), exp(high));
    } else {
        static const char *const why[LEARN_STATES] = {
            "still exploring when the run ended", "", "no candidate faster by the margin",
            "undecided after the most rounds", "the choice's advantage was gone at a revisit"};
        fprintf(stderr, "the library's own serves (%s)", why[l->state]);
    }
    fprintf(stderr, "; exploring cost %.3g ms, %.1f %% of the library's time here (cap %.0f %%%s)\n", 1e3 * l->cost,
            spent > 0 ? 100 * l->cost / spent : 0.0, 100 * the.learn.cap,
            spent > 0 && l->cost > the.learn.cap * spent ? "; passed by the first rounds: too few calls of this size "
                                                           "paid for them" : "");
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

static void print_series(FILE *out, int live, const learn_series *s) {
    fprintf(out, " %s:", live ? "live" : "dropped");
    for (int i = 0; i < s->count; i++) fprintf(out, "%s%.6g", i ? "," : "", s->values[i]);
    if (!s->count) fprintf(out, "-");
}

/* a learned line (parse_learned reads it) */
static void learned_line(FILE *out, int collective, int nprocs, const int *layout, long long low, long long high,
                         const learner *l) {
    fprintf(out, "learned %s %d ", collective_name[collective], nprocs);
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
                learned_line(out, g->e->collective, g->e->nprocs, g->e->layout, g->low, g->high, &g->l);
    for (int i = 0; i < d->nlearned; i++) {
        const learned_t *k = &d->learned[i];
        if (!most_calls(k->collective, k->nprocs, k->layout, k->low))
            learned_line(out, k->collective, k->nprocs, k->layout, k->low, k->high, &k->l);
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

/* at MPI_Finalize, on rank 0: per collective, the calls seen, served per schedule name, passed through per reason */
static void print_report(void) {
    int rank, size, n = the.deploy ? the.deploy->nschedules : 0, per = 1 + REASONS + n;
    long long *local = calloc((size_t)(2 * COLLECTIVES * per), sizeof(long long)), *sum = local + COLLECTIVES * per;
    if (!local) return;
    for (int k = 0; k < COLLECTIVES; k++) {
        local[k * per] = the.seen[k];
        memcpy(local + k * per + 1, the.passed[k], sizeof the.passed[k]);
        if (n) memcpy(local + k * per + 1 + REASONS, the.served + k * n, sizeof(long long) * (size_t)n);
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Reduce(local, sum, COLLECTIVES * per, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        fprintf(stderr, "a2a deploy report (%s%s; calls summed over %d ranks; bindings intercepted: C and Fortran, "
                "MPI_Init through %s)\n", the.deploy || the.path[0] ? the.path : "no deploy file",
                the.deploy || !the.path[0] ? "" : ", not in use: see the line at MPI_Init", size,
                the.fortran ? "Fortran" : "C");
        for (int k = 0; k < COLLECTIVES; k++) print_collective(k, sum + k * per, n);
        for (comm_state *c = the.states; c; c = c->next)
            for (const learning *g = c->learnings; g; g = g->next) print_learning(g);
        for (int i = 0; the.deploy && i < the.deploy->nunverified; i++)
            fprintf(stderr, "  unverified: the entries for %d ranks, which the decision never measured (it took the "
                    "table of %d ranks)\n", the.deploy->unverified[i][0], the.deploy->unverified[i][1]);
    }
    free(local);
}

static void nonblocking_finalized(void);

/* A2A_LEARN_OUT written on rank 0 (where anything was learned or read), or why not in one line; the learnings freed */
static void learned_out(void) {
    int rank, any = the.deploy && the.deploy->nlearned;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (comm_state *c = the.states; c; c = c->next) any |= c->learnings != NULL;
    int why = rank == 0 && any && the.learn_out[0] ? write_learned(the.learn_out) : 0;
    if (why) fprintf(stderr, "a2a: A2A_LEARN_OUT=%s cannot be written (%s); what was learned is not kept\n",
                     the.learn_out, strerror(why));
    for (comm_state *c = the.states; c; c = c->next)
        while (c->learnings) {
            learning *g = c->learnings;
            c->learnings = g->next;
            learn_free(&g->l);
            free(g);
        }
}

/* what MPI_Finalize does before the library's: the recording, the report, the communicators' states freed */
static void finishing(void) {
    if (the.ready) {
        nonblocking_finalized();
        if (the.recording) write_records();
        if (the.report) print_report();
        learned_out();
        for (comm_state *c = the.states; c; c = c->next)
            if (!c->freed) PMPI_Comm_delete_attr(c->comm, the.keyval);
        PMPI_Comm_free_keyval(&the.keyval);
        free_deploy(the.deploy);
        the.deploy = NULL;
        the.ready = 0;
    }
}

EXPORT int MPI_Finalize(void) {
    finishing();
    return PMPI_Finalize();
}

/* ---- the calls ---- */

#define SEEN(collective) (the.seen[collective]++, the.ready && (the.deploy || the.recording))

/* MPI_Alltoall and its large-count form: COUNT is int or MPI_Count */
#define SERVE_ALLTOALL(NAME, COUNT)                                                                                 \
    EXPORT int NAME(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,   \
                    MPI_Datatype recvtype, MPI_Comm comm) {                                                         \
        if (!SEEN(ALLTOALL))                                                                                        \
            return the.passed[ALLTOALL][NO_FILE]++,                                                                  \
                   P##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);                       \
        int result;                                                                                                 \
        learning *timing = NULL;                                                                                    \
        double start = the.recording ? PMPI_Wtime() : 0.0;                                                          \
        if (!served(ALLTOALL, sendbuf, recvbuf, sendcount * plain_size(sendtype), recvcount * plain_size(recvtype), \
                    sendtype, recvtype, NULL, comm, &result, &timing)) {                                            \
            double began = timing ? PMPI_Wtime() : 0.0;                                                             \
            result = P##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);                     \
            if (timing) visited(timing, timing->arm, PMPI_Wtime() - began);                                         \
        }                                                                                                           \
        if (the.recording) /* in place, the send arguments mean nothing */                                          \
            recorded(comm, ALLTOALL, sendbuf == MPI_IN_PLACE ? recvtype : sendtype, recvtype,                       \
                     sendbuf == MPI_IN_PLACE ? recvcount : sendcount, NULL, PMPI_Wtime() - start);                  \
        return result;                                                                                              \
    }

/* MPI_Alltoallv and its large-count form (COUNT, DISPL: int or MPI_Count, MPI_Aint); the blocks in bytes (send
   offsets, lengths, receive offsets, lengths) and the row sent, in elements */
#define SERVE_ALLTOALLV(NAME, COUNT, DISPL)                                                                         \
    static MPI_Aint *NAME##_blocks(MPI_Comm comm, const COUNT *sc, const DISPL *sd, MPI_Datatype st,               \
                                   const COUNT *rc, const DISPL *rd, MPI_Datatype rt, long long **row) {           \
        int n, inter;                                                                                               \
        *row = NULL;                                                                                                \
        if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||                                                    \
            (inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)                    \
            return NULL; /* the library will say what is wrong with it */                                           \
        MPI_Count ss = plain_size(st), rs = plain_size(rt);                                                         \
        MPI_Aint *b = malloc(sizeof(MPI_Aint) * 4 * (size_t)n);                                                     \
        *row = malloc(sizeof(long long) * (size_t)n);                                                               \
        if (!b || !*row) { /* neither: the call passes through, unrecorded */                                        \
            free(b), free(*row);                                                                                    \
            *row = NULL;                                                                                            \
            return NULL;                                                                                            \
        }                                                                                                           \
        for (int i = 0; i < n; i++) {                                                                               \
            b[i] = (MPI_Aint)(sd[i] * ss), b[n + i] = (MPI_Aint)(sc[i] * ss);                                        \
            b[2 * n + i] = (MPI_Aint)(rd[i] * rs), b[3 * n + i] = (MPI_Aint)(rc[i] * rs);                            \
            (*row)[i] = sc[i];                                                                                      \
        }                                                                                                           \
        return b;                                                                                                   \
    }                                                                                                               \
    EXPORT int NAME(const void *sendbuf, const COUNT sendcounts[], const DISPL sdispls[], MPI_Datatype sendtype,   \
                    void *recvbuf, const COUNT recvcounts[], const DISPL rdispls[], MPI_Datatype recvtype,         \
                    MPI_Comm comm) {                                                                                \
        if (!SEEN(ALLTOALLV))                                                                                       \
            return the.passed[ALLTOALLV][NO_FILE]++, P##NAME(sendbuf, sendcounts, sdispls, sendtype, recvbuf,       \
                                                             recvcounts, rdispls, recvtype, comm);                  \
        int result;                                                                                                 \
        long long *row = NULL;                                                                                      \
        MPI_Aint *blocks = sendbuf == MPI_IN_PLACE ? NULL : NAME##_blocks(comm, sendcounts, sdispls, sendtype,      \
                                                                          recvcounts, rdispls, recvtype, &row);     \
        double start = the.recording ? PMPI_Wtime() : 0.0;                                                          \
        if (!served(ALLTOALLV, sendbuf, recvbuf, 0, 0, sendtype, recvtype, blocks, comm, &result, NULL))           \
            result = P##NAME(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm); \
        if (the.recording && sendbuf != MPI_IN_PLACE) /* a row lacking on one rank is agreed on inside */             \
            recorded(comm, ALLTOALLV, sendtype, recvtype, 0, row, PMPI_Wtime() - start);                            \
        free(blocks);                                                                                               \
        free(row);                                                                                                  \
        return result;                                                                                              \
    }

SERVE_ALLTOALL(MPI_Alltoall, int)
SERVE_ALLTOALLV(MPI_Alltoallv, int, int)
#if MPI_VERSION >= 4
SERVE_ALLTOALL(MPI_Alltoall_c, MPI_Count)
SERVE_ALLTOALLV(MPI_Alltoallv_c, MPI_Count, MPI_Aint)
#endif

/* ---- the non-blocking and persistent forms ----
 *
 * Where the executor progresses inside MPI (A2AX_MPI_PROGRESS: MPICH's progress engine polls each exchange in flight),
 * a call the deploy file covers is served as a blocking one is: MPI_Ialltoall(v) returns a generalized request that the
 * exchange completes (MPI_Grequest_complete, from MPICH's progress: any MPI call of the rank, or its progress thread);
 * MPI_Alltoall_init returns a persistent zero-byte receive from this rank on a private self-communicator, which
 * MPI_Start posts as it starts the exchange and the exchange's end completes with a zero-byte send. So the program's
 * MPI_Wait, MPI_Test and their kin work as with the library's own requests, and only MPI_Start(all) and
 * MPI_Request_free are intercepted beside the calls.
 *
 * Each communicator gets its own private copy for these calls, made without blocking: its first non-blocking or
 * persistent all-to-all starts MPI_Comm_idup and passes through; the next waits for that copy, which every rank
 * started at its own first call, and is served. Node layouts are not asked for (that would block): a schedule for a
 * node layout serves these calls only where a blocking all-to-all on the communicator came first and found the layout.
 * Elsewhere (Open MPI) they pass through, counted. */

#ifdef A2AX_MPI_PROGRESS
typedef struct nb_state {
    comm_state c;            /* its private copy (MPI_Comm_idup), candidates and kept plans, as a blocking call's */
    MPI_Request making;      /* the MPI_Comm_idup in flight, MPI_REQUEST_NULL once waited for */
    int persistents, orphan; /* persistent requests that run on it; its communicator was freed while they live */
    unsigned long starts;    /* exchanges started on it: the next one's slot of tags */
    struct nb_state *next;
} nb_state;

typedef struct { MPI_Request request; a2ax_plan *plan; int transient; } pending; /* a served MPI_Ialltoall(v) */

typedef struct persistent { /* a served MPI_Alltoall_init: the program's request, its plan */
    MPI_Request request;
    a2ax_plan *plan;
    int tag;
    nb_state *state;
    struct persistent *next;
} persistent;

#define TAG_SLOTS 65536 /* at most: exchanges in flight together on one communicator, each with tags of its own */

static struct {
    int keyval, ready;
    unsigned tags;
    MPI_Comm self; /* where a persistent request's zero-byte message goes from this rank to itself */
    nb_state *states;
    persistent *persistents;
    long tag_stride, tag_slots; /* the tags one exchange of any schedule of the file uses; how many such slots */
} nb = {MPI_KEYVAL_INVALID, 0, 0, MPI_COMM_NULL, NULL, NULL, 1, 1};

static void release(nb_state *s) {
    free_plans(&s->c);
    if (s->c.own != MPI_COMM_NULL) PMPI_Comm_free(&s->c.own);
    free(s->c.candidates);
    s->c.candidates = NULL;
    s->c.ncandidates = 0;
}

/* the program freed the communicator: its plans (an exchange in flight completes first) and private copy, unless
   persistent requests still run on them */
static int forget_nonblocking(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    nb_state *s = value;
    if (s->making != MPI_REQUEST_NULL) PMPI_Wait(&s->making, MPI_STATUS_IGNORE);
    s->orphan = 1;
    if (!s->persistents) release(s);
    return MPI_SUCCESS;
}

/* the state of comm for these calls, or NULL at its first one (then its private copy is started) */
static nb_state *nonblocking_state(MPI_Comm comm) {
    nb_state *s;
    int found;
    if (!nb.ready) {
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget_nonblocking, &nb.keyval, NULL);
        PMPI_Comm_dup(MPI_COMM_SELF, &nb.self); /* one rank: local */
        int *bound, has;
        PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound, &has);
        for (int i = 0; i < the.deploy->nschedules; i++) {
            long tags = a2ax_tags(the.deploy->schedules[i]);
            nb.tag_stride = tags > nb.tag_stride ? tags : nb.tag_stride;
        }
        nb.tag_slots = ((has ? *bound : 32767) + 1L) / nb.tag_stride;
        nb.tag_slots = nb.tag_slots < 1 ? 1 : nb.tag_slots > TAG_SLOTS ? TAG_SLOTS : nb.tag_slots;
        nb.ready = 1;
    }
    PMPI_Comm_get_attr(comm, nb.keyval, &s, &found);
    if (found) {
        if (s->making != MPI_REQUEST_NULL) PMPI_Wait(&s->making, MPI_STATUS_IGNORE); /* every rank started it */
        return s;
    }
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    comm_state *c = &s->c, *blocking;
    c->comm = comm;
    c->id = -1;
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->rank);
    PMPI_Comm_get_attr(comm, the.keyval, &blocking, &found); /* its node layout, if a blocking call found it */
    c->candidates = calloc((size_t)the.deploy->nentries + 1, sizeof *c->candidates);
    for (int i = 0; c->candidates && i < the.deploy->nentries; i++) {
        const entry *e = &the.deploy->entries[i];
        int laid = 0;
        for (int j = 0; found && e->layout && j < blocking->ncandidates; j++) laid |= blocking->candidates[j] == e;
        if (e->nprocs == c->size && (!e->layout || laid)) c->candidates[c->ncandidates++] = e;
    }
    PMPI_Comm_idup(comm, &c->own, &s->making);
    s->next = nb.states;
    nb.states = s;
    PMPI_Comm_set_attr(comm, nb.keyval, s);
    return NULL;
}

static int pending_query(void *extra, MPI_Status *status) {
    (void)extra;
    PMPI_Status_set_elements_x(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int pending_free(void *extra) { /* the program's MPI_Wait or MPI_Test found it complete */
    pending *q = extra;
    if (q->transient) a2ax_free(q->plan);
    free(q);
    return MPI_SUCCESS;
}

static int pending_cancel(void *extra, int complete) { /* a collective cannot be cancelled: it completes */
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

static void pending_done(void *arg) { PMPI_Grequest_complete(((pending *)arg)->request); }

/* the plan a non-blocking or persistent call of the file's entry runs on comm (NULL: pass the call through, why in
   *why): checked as a blocking call is, on the communicator's private copy for these calls */
static a2ax_plan *planned_nonblocking(int collective, const void *send, void *recv, MPI_Count send_bytes,
                                      MPI_Count recv_bytes, MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks,
                                      MPI_Comm comm, int own_plan, int *transient, nb_state **state, int *why) {
    int inter;
    *why = NO_FILE;
    if (!the.deploy) return NULL;
    *why = collective == ALLTOALL && own_plan ? PERSISTENT : NONBLOCKING;
    if (a2ax_progress_mode() != A2AX_BY_MPI) return NULL; /* A2A_EXECUTOR_PROGRESS chose another way: not MPI's */
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) inter = 1; /* not one it can use: the library's */
    *why = inter ? INTERCOMM : send == MPI_IN_PLACE ? IN_PLACE : collective == ALLTOALLV && !blocks ? PREPARE
         : !plain_size(st) || !plain_size(rt) ? DATATYPE : collective == ALLTOALL && send_bytes != recv_bytes ? SIGNATURE
         : -1;
    if (*why >= 0) return NULL;
    *why = EMPTY;
    if (collective == ALLTOALL && send_bytes == 0) return NULL;
    int size, sized = 0, any = 0;
    PMPI_Comm_size(comm, &size);
    for (int i = 0; i < the.deploy->nentries; i++) {
        any |= the.deploy->entries[i].collective == collective;
        sized |= the.deploy->entries[i].nprocs == size && the.deploy->entries[i].collective == collective;
    }
    *why = any ? NPROCS : COLLECTIVE; /* no private copy made for a size or collective the file lacks */
    if (!sized) return NULL;
    nb_state *s = *state = nonblocking_state(comm);
    *why = PRIVATE_COPY;
    if (!s) return NULL;
    const entry *e = chosen(&s->c, collective, send_bytes, why);
    if (e && e->learn) *why = LEARNING_BLOCKING;
    if (!e || e->learn) return NULL;
    *transient = own_plan;
    a2ax_plan *plan = own_plan ? NULL : bound(&s->c, e->schedule, send, recv, (MPI_Aint)send_bytes, blocks);
    if (!plan) { /* a persistent request's own, or every kept plan has an exchange in flight: one for this call */
        *transient = 1;
        plan = prepared(&s->c, e->schedule, send, recv, (MPI_Aint)send_bytes, blocks);
    }
    *why = PREPARE;
    if (plan) the.served[collective * the.deploy->nschedules + e->schedule]++;
    return plan;
}

/* an idle plan about to start on s's private copy takes the next slot of tags: a communicator's collectives start in
   the same order on every rank, so each exchange gets the same slot everywhere, and exchanges in flight together on
   one communicator (two MPI_Ialltoall, then MPI_Waitall) never match each other's messages */
static void next_tags(nb_state *s, a2ax_plan *plan) {
    a2ax_tag_from(plan, (int)((long)(s->starts++ % (unsigned long)nb.tag_slots) * nb.tag_stride));
}

/* serve a non-blocking call (1, its result in *result), else 0: the caller passes it on */
static int served_nonblocking(int collective, const void *send, void *recv, MPI_Count send_bytes, MPI_Count recv_bytes,
                              MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks, MPI_Comm comm,
                              MPI_Request *request, int *result) {
    int why, transient;
    nb_state *state;
    a2ax_plan *plan = planned_nonblocking(collective, send, recv, send_bytes, recv_bytes, st, rt, blocks, comm, 0,
                                          &transient, &state, &why);
    pending *q = plan ? malloc(sizeof *q) : NULL;
    if (!q) {
        if (plan && transient) a2ax_free(plan);
        return passed(collective, plan ? PREPARE : why);
    }
    *q = (pending){MPI_REQUEST_NULL, plan, transient};
    if (PMPI_Grequest_start(pending_query, pending_free, pending_cancel, q, &q->request) != MPI_SUCCESS) {
        pending_free(q);
        return passed(collective, PREPARE);
    }
    next_tags(state, plan);
    if (a2ax_start_then(plan, pending_done, q) != 0) { /* cannot happen (an idle plan, a progress mode that runs it) */
        a2ax_run(plan);
        pending_done(q);
    }
    *request = q->request;
    *result = MPI_SUCCESS;
    return 1;
}

/* a persistent request of this library's, or NULL */
static persistent **ours(const MPI_Request *request) {
    persistent **at = &nb.persistents;
    while (*at && (*at)->request != *request) at = &(*at)->next;
    return *at ? at : NULL;
}

static int served_persistent(const void *send, void *recv, MPI_Count send_bytes, MPI_Count recv_bytes,
                             MPI_Datatype st, MPI_Datatype rt, MPI_Comm comm, MPI_Request *request, int *result) {
    int why, transient, ub, found, *bound_of_tags;
    nb_state *state;
    a2ax_plan *plan = planned_nonblocking(ALLTOALL, send, recv, send_bytes, recv_bytes, st, rt, NULL, comm, 1,
                                          &transient, &state, &why);
    persistent *r = plan ? malloc(sizeof *r) : NULL;
    if (!r) {
        a2ax_free(plan);
        return passed(ALLTOALL, plan ? PREPARE : why);
    }
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound_of_tags, &found);
    ub = found ? *bound_of_tags : 32767;
    *r = (persistent){MPI_REQUEST_NULL, plan, (int)(nb.tags++ % (unsigned)ub), state, nb.persistents};
    *result = PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, r->tag, nb.self, &r->request);
    state->persistents++;
    nb.persistents = r;
    *request = r->request;
    return 1;
}

static void persistent_done(void *arg) { /* the exchange is complete: the program's request completes */
    MPI_Request sent;
    PMPI_Isend(NULL, 0, MPI_BYTE, 0, ((persistent *)arg)->tag, nb.self, &sent);
    PMPI_Request_free(&sent);
}

static void persistent_freed(persistent **at) {
    persistent *r = *at;
    *at = r->next;
    a2ax_free(r->plan);
    if (--r->state->persistents == 0 && r->state->orphan) release(r->state);
    free(r);
}

static void nonblocking_finalized(void) {
    while (nb.persistents) persistent_freed(&nb.persistents);
    for (nb_state *s = nb.states; s; s = s->next)
        if (!s->orphan) PMPI_Comm_delete_attr(s->c.comm, nb.keyval);
    while (nb.states) {
        nb_state *s = nb.states;
        nb.states = s->next;
        free(s);
    }
    if (nb.ready) {
        PMPI_Comm_free_keyval(&nb.keyval);
        PMPI_Comm_free(&nb.self);
    }
    nb.ready = 0;
}

#define NONBLOCKING_SERVED(collective, ...)                                                                         \
    (SEEN(collective) ? served_nonblocking(collective, __VA_ARGS__) : passed(collective, NO_FILE))
#define PERSISTENT_SERVED(...) (SEEN(ALLTOALL) ? served_persistent(__VA_ARGS__) : passed(ALLTOALL, NO_FILE))

EXPORT int MPI_Start(MPI_Request *request) {
    persistent **at = ours(request);
    int result = PMPI_Start(request);
    if (at && result == MPI_SUCCESS) {
        if (a2ax_busy((*at)->plan)) /* a program that restarts before its wait completed: its rounds keep their tags */
            a2ax_wait((*at)->plan);
        next_tags((*at)->state, (*at)->plan);
        a2ax_start_then((*at)->plan, persistent_done, *at);
    }
    return result;
}

EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
    int result = MPI_SUCCESS;
    for (int i = 0; i < count && result == MPI_SUCCESS; i++) result = MPI_Start(&requests[i]);
    return result;
}

EXPORT int MPI_Request_free(MPI_Request *request) {
    persistent **at = ours(request);
    int result = PMPI_Request_free(request);
    if (at) persistent_freed(at);
    return result;
}
#else
static void nonblocking_finalized(void) {}

#define NONBLOCKING_SERVED(collective, ...) (the.seen[collective]++, passed(collective, NONBLOCKING))
#define PERSISTENT_SERVED(...) (the.seen[ALLTOALL]++, passed(ALLTOALL, PERSISTENT))
#endif

/* MPI_Ialltoall and its large-count form: COUNT is int or MPI_Count */
#define SERVE_IALLTOALL(NAME, COUNT)                                                                                \
    EXPORT int NAME(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,   \
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {                                   \
        int result;                                                                                                 \
        if (NONBLOCKING_SERVED(ALLTOALL, sendbuf, recvbuf, sendcount * plain_size(sendtype),                        \
                               recvcount * plain_size(recvtype), sendtype, recvtype, NULL, comm, request, &result)) \
            return result;                                                                                          \
        return P##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);                  \
    }

/* MPI_Ialltoallv and its large-count form; its blocks as the blocking call's (NAME##_blocks, BLOCKING's) */
#define SERVE_IALLTOALLV(NAME, BLOCKING, COUNT, DISPL)                                                              \
    EXPORT int NAME(const void *sendbuf, const COUNT sendcounts[], const DISPL sdispls[], MPI_Datatype sendtype,   \
                    void *recvbuf, const COUNT recvcounts[], const DISPL rdispls[], MPI_Datatype recvtype,         \
                    MPI_Comm comm, MPI_Request *request) {                                                          \
        int result;                                                                                                 \
        long long *row = NULL;                                                                                      \
        MPI_Aint *blocks = sendbuf == MPI_IN_PLACE || !the.deploy ? NULL                                            \
                           : BLOCKING##_blocks(comm, sendcounts, sdispls, sendtype, recvcounts, rdispls, recvtype,  \
                                               &row);                                                              \
        int done = NONBLOCKING_SERVED(ALLTOALLV, sendbuf, recvbuf, 0, 0, sendtype, recvtype, blocks, comm, request, \
                                      &result);                                                                     \
        free(blocks);                                                                                               \
        free(row);                                                                                                  \
        if (done) return result;                                                                                    \
        return P##NAME(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,       \
                       request);                                                                                    \
    }

/* MPI_Alltoall_init and its large-count form */
#define SERVE_ALLTOALL_INIT(NAME, COUNT)                                                                            \
    EXPORT int NAME(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,   \
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request) {                    \
        int result;                                                                                                 \
        if (PERSISTENT_SERVED(sendbuf, recvbuf, sendcount * plain_size(sendtype), recvcount * plain_size(recvtype), \
                              sendtype, recvtype, comm, request, &result))                                          \
            return result;                                                                                          \
        return P##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);            \
    }

SERVE_IALLTOALL(MPI_Ialltoall, int)
SERVE_IALLTOALLV(MPI_Ialltoallv, MPI_Alltoallv, int, int)
#if MPI_VERSION >= 4
SERVE_IALLTOALL(MPI_Ialltoall_c, MPI_Count)
SERVE_IALLTOALLV(MPI_Ialltoallv_c, MPI_Alltoallv_c, MPI_Count, MPI_Aint)
SERVE_ALLTOALL_INIT(MPI_Alltoall_init, int)
SERVE_ALLTOALL_INIT(MPI_Alltoall_init_c, MPI_Count)
#endif

/* ---- the Fortran bindings ----
 *
 * Open MPI's Fortran library calls PMPI_Init, PMPI_Alltoall, ... itself, so a Fortran program's calls never meet the C
 * functions above; MPICH's calls MPI_*, and meets them. So the Fortran entry points of the calls served and of
 * MPI_Init(_thread) and MPI_Finalize are intercepted under every name a compiler gives them (mpi_alltoall_,
 * mpi_alltoall__, mpi_alltoall, MPI_ALLTOALL; mpi_f08's mpi_alltoall_f08_, whose handles are structures of one
 * integer and whose error argument is optional): init and finalize run the library's own and do what MPI_Init and
 * MPI_Finalize do here (once, whichever binding came first); an all-to-all has its handles converted (MPI_Type_f2c,
 * MPI_Comm_f2c) and Fortran's MPI_IN_PLACE and MPI_BOTTOM named as C's, and goes to the C function above. Where the
 * library's Fortran MPI_IN_PLACE cannot be told here, or liba2a refused the library, the call goes to the library's
 * own Fortran entry point untouched. */

typedef void fortran_entry(void);

/* the library's own Fortran entry point of this name (the next after liba2a), looked up once into *next */
static fortran_entry *next_entry(const char *name, fortran_entry **next) {
    if (!*next) *(void **)next = dlsym(RTLD_NEXT, name);
    return *next;
}

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM, as the library's Fortran marks them: the addresses of Open MPI's symbols
   under each name and of MPICH's mpi_f08 ones, and (the last) MPICH's variable that its Fortran init sets to one */
static const char *const in_place_names[FORTRAN_MARKS] = {
    "mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE",
    "MPIR_F08_MPI_IN_PLACE", "MPIR_F_MPI_IN_PLACE"};
static const char *const bottom_names[FORTRAN_MARKS] = {
    "mpi_fortran_bottom_", "mpi_fortran_bottom", "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM", "MPIR_F08_MPI_BOTTOM",
    "MPIR_F_MPI_BOTTOM"};

static int marked(const void *buffer, void *const *marks) {
    for (int i = 0; i < FORTRAN_MARKS; i++)
        if (marks[i] && (i == FORTRAN_MARKS - 1 ? *(void *const *)marks[i] : marks[i]) == buffer) return 1;
    return 0;
}

/* a Fortran buffer argument as C sees it (MPI_IN_PLACE, MPI_BOTTOM, or itself); 0 where this library's Fortran
   MPI_IN_PLACE is not one liba2a can tell, or liba2a does not run here (the marks are looked up once, after init) */
static int fortran_buffer(void *buffer, void **c) {
    if (!the.began || the.refused || sizeof(MPI_Fint) != sizeof(int)) return 0;
    if (!the.marks_looked) {
        for (int i = 0; i < FORTRAN_MARKS; i++) {
            the.in_place[i] = dlsym(RTLD_DEFAULT, in_place_names[i]);
            the.bottom[i] = dlsym(RTLD_DEFAULT, bottom_names[i]);
            the.marks_known |= the.in_place[i] != NULL && (i < 4 || i == FORTRAN_MARKS - 1);
        }
        the.marks_looked = 1;
    }
    if (!the.marks_known) return 0;
    *c = marked(buffer, the.in_place) ? MPI_IN_PLACE : marked(buffer, the.bottom) ? MPI_BOTTOM : buffer;
    return 1;
}

static void fortran_init(const char *name, fortran_entry **entry, MPI_Fint *required, MPI_Fint *provided,
                         MPI_Fint *ierr) {
    MPI_Fint result = MPI_ERR_OTHER;
    fortran_entry *next = next_entry(name, entry);
    the.fortran = !the.began;
    if (next && required) ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *))next)(required, provided, &result);
    else if (next) ((void (*)(MPI_Fint *))next)(&result);
    if (result == MPI_SUCCESS) started(); /* done already where the library's Fortran calls MPI_Init (MPICH) */
    if (ierr) *ierr = result;
}

static void fortran_finalize(const char *name, fortran_entry **entry, MPI_Fint *ierr) {
    MPI_Fint result = MPI_ERR_OTHER;
    fortran_entry *next = next_entry(name, entry);
    finishing();
    if (next) ((void (*)(MPI_Fint *))next)(&result);
    if (ierr) *ierr = result;
}

static void fortran_alltoall(const char *name, fortran_entry **entry, void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,
                             MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr) {
    void *send, *recv;
    MPI_Fint result = MPI_ERR_OTHER;
    if (fortran_buffer(sb, &send) && fortran_buffer(rb, &recv))
        result = MPI_Alltoall(send, *sc, MPI_Type_f2c(*st), recv, *rc, MPI_Type_f2c(*rt), MPI_Comm_f2c(*comm));
    else if (next_entry(name, entry))
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))*entry)(
            sb, sc, st, rb, rc, rt, comm, &result);
    if (ierr) *ierr = result;
}

static void fortran_alltoallv(const char *name, fortran_entry **entry, void *sb, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *rb,
                              MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr) {
    void *send, *recv;
    MPI_Fint result = MPI_ERR_OTHER;
    if (fortran_buffer(sb, &send) && fortran_buffer(rb, &recv))
        result = MPI_Alltoallv(send, (const int *)sc, (const int *)sd, MPI_Type_f2c(*st), recv, (const int *)rc,
                               (const int *)rd, MPI_Type_f2c(*rt), MPI_Comm_f2c(*comm));
    else if (next_entry(name, entry))
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))*entry)(sb, sc, sd, st, rb, rc, rd, rt, comm, &result);
    if (ierr) *ierr = result;
}

/* each entry point under the names Fortran compilers give it: lower case with one, two or no underscores, upper case
   (mpif.h and `use mpi`), and mpi_f08's (MPI_Fint * stands for its TYPE(MPI_Comm) and kin: one integer, by reference) */
#define FORTRAN_NAME(NAME, PARAMETERS, CALL, ARGUMENTS)                                                             \
    EXPORT void NAME PARAMETERS {                                                                                   \
        static fortran_entry *next; /* the library's own, looked up at the first call */                            \
        CALL(#NAME, &next, ARGUMENTS);                                                                              \
    }
#define FORTRAN(lower, upper, PARAMETERS, CALL, ARGUMENTS)                                                           \
    FORTRAN_NAME(lower##_, PARAMETERS, CALL, LIST(ARGUMENTS))                                                       \
    FORTRAN_NAME(lower##__, PARAMETERS, CALL, LIST(ARGUMENTS))                                                      \
    FORTRAN_NAME(lower, PARAMETERS, CALL, LIST(ARGUMENTS))                                                          \
    FORTRAN_NAME(upper, PARAMETERS, CALL, LIST(ARGUMENTS))                                                          \
    FORTRAN_NAME(lower##_f08_, PARAMETERS, CALL, LIST(ARGUMENTS))
#define LIST(...) __VA_ARGS__

FORTRAN(mpi_init, MPI_INIT, (MPI_Fint *ierr), fortran_init, LIST(NULL, NULL, ierr))
FORTRAN(mpi_init_thread, MPI_INIT_THREAD, (MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr), fortran_init,
        LIST(required, provided, ierr))
FORTRAN(mpi_finalize, MPI_FINALIZE, (MPI_Fint *ierr), fortran_finalize, LIST(ierr))
FORTRAN(mpi_alltoall, MPI_ALLTOALL,
        (void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr),
        fortran_alltoall, LIST(sb, sc, st, rb, rc, rt, comm, ierr))
FORTRAN(mpi_alltoallv, MPI_ALLTOALLV,
        (void *sb, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *rb, MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt,
         MPI_Fint *comm, MPI_Fint *ierr),
        fortran_alltoallv, LIST(sb, sc, sd, st, rb, rc, rd, rt, comm, ierr))
