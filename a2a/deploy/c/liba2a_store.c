/* liba2a's store of evidence that many jobs share: A2A_LEARN_DIR (docs/learn.md, "A store many jobs share").
 *
 * A folder on any file system a cluster has (NFS, Lustre): no lock is relied on, only a rename within the folder.
 * Each job adds one file of its own at MPI_Finalize (rank 0: written under a hidden temporary name, then renamed;
 * named by host, process and time), holding only what this job added (its rounds and calls, not what it read). A
 * file is sections, one per job (a2a/deploy/store.py reads and writes the same):
 *
 *   a2a-evidence 1
 *   job NAME
 *   evidence LIBRARY CANDIDATES COLLECTIVE NPROCS LAYOUT LOW HIGH STATE CHOICE CALLS EXPLORED REVISITED COST SERIES...
 *   end CHECKSUM                                        (FNV-1a of the bytes before the end line)
 *
 * LIBRARY is the MPI library's family and version (MPICH/4.0.2), CANDIDATES the learn line's by name, LAYOUT the
 * communicator's node layout; the rest is a learned line's (learned_line). At MPI_Init rank 0 reads every file and
 * counts each job's section once: a compact file holds the sections of the files it absorbed, so a reader that meets
 * a file and a compact file that absorbed it (or two compact files made at once) counts it once. Where more than
 * COMPACT files lie there, rank 0 writes one compact file of every section it read and then removes the files it
 * read: a job reads at most a few files however many jobs ran. The lines of this job's library go to every rank in
 * one MPI_Bcast (every rank must decide alike: none reads the folder alone), and every rank merges them per class:
 * the series concatenated by round, the calls summed, the state decided afresh on the merged evidence. */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define COMPACT 32                      /* files in the folder beyond which a job's rank 0 compacts them */
#define SUFFIX ".a2a-evidence"          /* an evidence file's name ends so; a hidden one (.NAME) is being written */
#define HEADER "a2a-evidence 1\n"

/* the evidence of one class, merged from every job's lines of it */
typedef struct stored {
    char candidates[256];
    int collective, nprocs, *layout;
    long long low;
    learner l;
    struct stored *next;
} stored;

/* what rank 0 read: every job's section once, the lines of this job's library, and the files it came from */
typedef struct {
    char **jobs, **files;
    int njobs, nfiles, bad, apart;
    FILE *sections, *ours; /* the sections (for a compact file); this library's evidence lines (for the ranks) */
} reading;

/* this job's MPI library as the store keys it: its family, '/', its version (the first word that begins with a digit
   after its name) */
static void library_key(char *key, size_t room) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 8192] = "";
    int length;
    if (PMPI_Get_library_version(version, &length) != MPI_SUCCESS) version[0] = 0;
    const char *at = version;
    while (*at && !(*at >= '0' && *at <= '9' && at > version && strchr(" \tv:", at[-1]))) at++;
    snprintf(key, room, "%s/%.*s", family(version), (int)strcspn(at, " \t\n,"), at);
    for (char *c = key; *c; c++)
        if (*c == ' ') *c = '_';
}

/* e's candidates by name, as the store keys them (control: the library's own under another name) */
static void candidates_of(const entry *e, char *text, size_t room) {
    text[0] = 0;
    for (int i = 0; i < e->ncandidates; i++) {
        size_t used = strlen(text);
        snprintf(text + used, room - used, "%s%s", i ? "," : "",
                 e->candidates[i] >= 0 ? the.deploy->names[e->candidates[i]] : "control");
    }
}

/* 0 where the folder can be written, else the errno that says why not */
static int usable(const char *folder) {
    struct stat info;
    char probe[1200];
    if (stat(folder, &info)) return errno;
    if (!S_ISDIR(info.st_mode)) return ENOTDIR;
    snprintf(probe, sizeof probe, "%s/.a2a-probe-%d", folder, (int)getpid());
    FILE *file = fopen(probe, "w");
    if (!file) return errno;
    fclose(file);
    remove(probe);
    return 0;
}

/* a file's text whole (NUL-ended), or NULL: unreadable, or not an evidence file whose checksum holds */
static char *evidence_text(const char *path) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    char *text = NULL;
    size_t size = 0, got;
    char chunk[65536];
    FILE *into = open_memstream(&text, &size);
    while (into && (got = fread(chunk, 1, sizeof chunk, file)) > 0) fwrite(chunk, 1, got, into);
    fclose(file);
    if (!into || fclose(into)) return free(text), NULL;
    char *end = size > 4 ? text + size - 1 : NULL; /* the last line: 'end CHECKSUM' */
    while (end && end > text && end[-1] != '\n') end--;
    char stated[17] = "", computed[17];
    if (end) snprintf(computed, sizeof computed, "%016llx", (unsigned long long)a2ax_fnv(text, (size_t)(end - text),
                                                                                         A2AX_FNV_BASIS));
    if (!end || strncmp(text, HEADER, strlen(HEADER)) || sscanf(end, "end %16s", stated) != 1 ||
        strcmp(stated, computed))
        return free(text), NULL;
    *end = 0;
    return text;
}

static int seen(reading *r, const char *job) {
    for (int i = 0; i < r->njobs; i++)
        if (!strcmp(r->jobs[i], job)) return 1;
    char **more = realloc(r->jobs, sizeof *more * (size_t)(r->njobs + 1));
    if (!more) return 1; /* no memory: skipped */
    r->jobs = more;
    if (!(r->jobs[r->njobs] = strdup(job))) return 1;
    r->njobs++;
    return 0;
}

/* one file's sections taken: each job's once, this library's evidence lines apart */
static void taken(reading *r, char *text, const char *library) {
    int skip = 1;
    size_t named = strlen(library);
    char *save = NULL;
    for (char *line = strtok_r(text + strlen(HEADER), "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "job ", 4)) skip = seen(r, line + 4);
        if (skip) continue;
        fprintf(r->sections, "%s\n", line);
        if (strncmp(line, "evidence ", 9)) continue;
        if (!strncmp(line + 9, library, named) && line[9 + named] == ' ') fprintf(r->ours, "%s\n", line);
        else r->apart++;
    }
}

/* `body` (with its end line added) written to FOLDER/NAME: under a hidden temporary name, then renamed; 0, else the
   errno */
static int written_whole(const char *folder, const char *name, const char *body, size_t size) {
    char temporary[1400], path[1400];
    snprintf(temporary, sizeof temporary, "%s/.%s.tmp", folder, name);
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *file = fopen(temporary, "w");
    unsigned long long sum = a2ax_fnv(body, size, A2AX_FNV_BASIS);
    int bad = !file || fwrite(body, 1, size, file) != size || fprintf(file, "end %016llx\n", sum) < 0;
    bad = (file && fclose(file)) || bad ? errno ? errno : EIO : rename(temporary, path) ? errno : 0;
    if (bad) remove(temporary);
    return bad;
}

/* a name no other job's file has: this host, this process, the time to the microsecond */
static void unique_name(char *name, size_t room, const char *kind) {
    char host[256] = "host", stamp[32];
    struct timeval now;
    gettimeofday(&now, NULL);
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", gmtime(&now.tv_sec));
    snprintf(name, room, "%s%s-%d-%s.%06ld%s", kind, host, (int)getpid(), stamp, (long)now.tv_usec, SUFFIX);
}

/* many files: one compact file of every section read, then the files read removed (a job that read one of them in
   the meantime still finds its sections in the compact file, or counted them already) */
static void compacted(const char *folder, reading *r, const char *sections, size_t size) {
    char name[512];
    unique_name(name, sizeof name, "compact-");
    char *body = malloc(strlen(HEADER) + size + 1);
    if (!body) return;
    memcpy(body, HEADER, strlen(HEADER));
    memcpy(body + strlen(HEADER), sections, size);
    if (!written_whole(folder, name, body, strlen(HEADER) + size))
        for (int i = 0; i < r->nfiles; i++) remove(r->files[i]);
    free(body);
}

/* rank 0: every evidence file of the folder read; this library's lines as one text (malloc'd) */
static char *gathered(const char *folder, const char *library, reading *r) {
    char *sections = NULL, *ours = NULL;
    size_t nsections = 0, nours = 0;
    r->sections = open_memstream(&sections, &nsections), r->ours = open_memstream(&ours, &nours);
    DIR *listing = r->sections && r->ours ? opendir(folder) : NULL;
    for (struct dirent *f; listing && (f = readdir(listing)) != NULL;) {
        size_t length = strlen(f->d_name);
        if (f->d_name[0] == '.' || length <= strlen(SUFFIX) || strcmp(f->d_name + length - strlen(SUFFIX), SUFFIX))
            continue;
        char path[1400], *text, **more = realloc(r->files, sizeof *more * (size_t)(r->nfiles + 1));
        snprintf(path, sizeof path, "%s/%s", folder, f->d_name);
        if (!more) break;
        r->files = more;
        if (!(text = evidence_text(path))) { /* being removed by a compaction, or not one: not ours to remove */
            r->bad++;
            continue;
        }
        r->files[r->nfiles++] = strdup(path);
        taken(r, text, library);
        free(text);
    }
    if (listing) closedir(listing);
    if (r->sections) fclose(r->sections);
    if (r->ours) fclose(r->ours);
    if (sections && r->nfiles > COMPACT) compacted(folder, r, sections, nsections);
    free(sections);
    return ours;
}

static void forgotten(reading *r) {
    for (int i = 0; i < r->njobs; i++) free(r->jobs[i]);
    for (int i = 0; i < r->nfiles; i++) free(r->files[i]);
    free(r->jobs), free(r->files);
}

/* one evidence line ('evidence LIBRARY CANDIDATES ...') merged into the classes: its series after theirs */
static int merged(char *line) {
    char library[256], candidates[256];
    int used = 0;
    learned_t k;
    if (sscanf(line, "evidence %255s %255s %n", library, candidates, &used) != 2 || parse_learned(line + used, &k))
        return 0;
    stored *s = the.stored;
    while (s && !(s->collective == k.collective && s->nprocs == k.nprocs && s->low == k.low &&
                  !strcmp(s->candidates, candidates) && same_layout(s->layout, k.layout, k.nprocs) &&
                  s->l.narms == k.l.narms))
        s = s->next;
    if (!s) {
        if (!k.layout || !(s = calloc(1, sizeof *s))) return free(k.layout), learn_free(&k.l), 0;
        *s = (stored){.collective = k.collective, .nprocs = k.nprocs, .layout = k.layout, .low = k.low, .l = k.l};
        snprintf(s->candidates, sizeof s->candidates, "%s", candidates);
        s->next = the.stored, the.stored = s;
        return 1;
    }
    learner *to = &s->l;
    for (int i = 0; i < k.l.library.count; i++) learn_push(&to->library, k.l.library.values[i]);
    for (int a = 1; a < to->narms; a++)
        for (int i = 0; i < k.l.ratio[a].count; i++) learn_push(&to->ratio[a], k.l.ratio[a].values[i]);
    to->calls += k.l.calls, to->explored += k.l.explored, to->revisited += k.l.revisited, to->cost += k.l.cost;
    to->givebacks |= k.l.givebacks;
    free(k.layout), learn_free(&k.l);
    return 1;
}

/* a merged class's state decided afresh: every candidate live, the decision run on the merged rounds (the e-value
   depends on the counts only, so this is the same test at a later look; one job's state would let its rounds decide
   for every job, whatever the others' said) */
static void decided_afresh(learner *l) {
    double cost = l->cost;
    l->state = l->givebacks ? LEARN_GIVEN_BACK : LEARN_EXPLORING, l->choice = 0, l->in_block = 0;
    l->round = l->rounds = 0, l->share = learn_share_of(1) / (1 + l->givebacks);
    for (int a = 0; a < l->narms; a++) l->live[a] = 1;
    learn_decide(l, &the.learn);
    l->cost = cost;
}

void store_opened(int rank) {
    char library[256];
    long long length = -1;
    char *text = NULL;
    reading r = {0};
    if (!the.learn_dir[0]) return;
    library_key(library, sizeof library);
    if (rank == 0) {
        int why = usable(the.learn_dir);
        if (why)
            fprintf(stderr, "a2a: A2A_LEARN_DIR=%s cannot be used (%s); learning runs on without the store\n",
                    the.learn_dir, why == ENOTDIR ? "not a folder" : strerror(why));
        else if ((text = gathered(the.learn_dir, library, &r)) != NULL)
            length = (long long)strlen(text);
    }
    if (PMPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS) length = -1;
    if (length >= 0 && rank != 0 && !(text = malloc((size_t)length + 1))) length = -1; /* said below: not used */
    if (length >= 0 && PMPI_Bcast(text, (int)length, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS) length = -1;
    int lines = 0, classes = 0, usable_everywhere = length >= 0, all = 0;
    if (PMPI_Allreduce(&usable_everywhere, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all = 0;
    if (all) {
        text[length] = 0;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) lines += merged(line);
        for (stored *s = the.stored; s; s = s->next, classes++) decided_afresh(&s->l);
    } else {
        the.learn_dir[0] = 0;
    }
    if (rank == 0 && all && the.report)
        fprintf(stderr, "a2a: A2A_LEARN_DIR=%s: jobs read %d (files %d%s); lines of %s merged %d (classes %d); lines "
                "of other MPI libraries set apart %d\n", the.learn_dir, r.njobs, r.nfiles,
                r.nfiles > COMPACT ? ", compacted into one" : "", library, lines, classes, r.apart);
    free(text);
    forgotten(&r);
}

const learner *stored_learner(const entry *e, const int *layout, long long low) {
    char candidates[256];
    candidates_of(e, candidates, sizeof candidates);
    for (const stored *s = the.stored; s; s = s->next)
        if (s->collective == e->collective && s->nprocs == e->nprocs && s->low == low &&
            !strcmp(s->candidates, candidates) && same_layout(s->layout, layout, e->nprocs) &&
            s->l.narms == 1 + e->ncandidates)
            return &s->l;
    return NULL;
}

/* the last n values of a series (all, where it holds fewer: a give-back began it again) */
static learn_series tail(const learn_series *s, long long n) {
    int count = n < s->count ? (int)n : s->count;
    return (learn_series){.values = s->values + s->count - count, .count = count, .room = count};
}

/* the evidence line of what this job added to g's class */
static void own_line(FILE *out, const learning *g, const char *library) {
    char word[600], candidates[256];
    learner own = g->l; /* a view: its series point into g's */
    own.library = tail(&g->l.library, g->own[0]);
    for (int a = 1; a < own.narms; a++) own.ratio[a] = tail(&g->l.ratio[a], g->own[a]);
    own.calls -= g->before[0], own.explored -= g->before[1], own.revisited -= g->before[2];
    own.cost -= g->cost_before;
    candidates_of(g->e, candidates, sizeof candidates);
    snprintf(word, sizeof word, "evidence %s %s ", library, candidates);
    learned_line(out, word, g->e->collective, g->e->nprocs, g->layout, g->low, g->high, &own);
}

void store_written(void) {
    int rank, lines = 0;
    char library[256], name[512], *body = NULL;
    size_t size = 0;
    if (!the.learn_dir[0] || PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != 0) return;
    library_key(library, sizeof library);
    unique_name(name, sizeof name, "");
    FILE *out = open_memstream(&body, &size);
    if (out) fprintf(out, "%sjob %.*s\n", HEADER, (int)(strlen(name) - strlen(SUFFIX)), name);
    for (comm_state *c = the.states; out && c; c = c->next)
        for (const learning *g = c->learnings; g; g = g->next)
            if (g->layout && g->l.calls > g->before[0]) { /* MPI_Alltoall's classes and MPI_Alltoallv's */
                own_line(out, g, library);
                lines++;
            }
    int why = !out || fclose(out) ? ENOMEM : lines ? written_whole(the.learn_dir, name, body, size) : 0;
    if (why)
        fprintf(stderr, "a2a: A2A_LEARN_DIR=%s: this job's evidence cannot be written (%s); it is not kept\n",
                the.learn_dir, strerror(why));
    free(body);
}

void store_closed(void) {
    while (the.stored) {
        stored *s = the.stored;
        the.stored = s->next;
        free(s->layout);
        learn_free(&s->l);
        free(s);
    }
}
