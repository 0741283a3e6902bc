/* The schedule executor (executor.h): a schedule file's programs run as rounds of MPI requests. */
#include "executor.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SEND = 0, RECV = 1, TEMP = 2 };

typedef struct { long buffer, first, blocks; } region;
typedef struct { long peer, tag, first_region, regions; } message;
typedef struct { long first_copy, copies, first_message, receives, sends, first_wait, waits; } round_t;
typedef struct { long temp, first_round, rounds; } program;

struct a2ax_schedule {
    int nprocs;
    char algorithm[128];
    program *programs;
    round_t *rounds;
    message *messages;
    region *regions; /* the messages' regions, then the copies' (source, target) pairs */
    long *waits;
    long nrounds, nmessages, nregions, nwaits;
};

typedef struct { char *to; const char *from; size_t bytes; } copy_t;
typedef struct { void *buf; int count; MPI_Datatype type; int owned; int peer, tag; } posted;

struct a2ax_plan {
    MPI_Comm comm;
    long nrounds, current;
    int owns_comm;
    int first_tag;       /* added to every message's tag (a2ax_tag_from) */
    _Atomic int idle;    /* 1 while no exchange is in flight: written last by what completes one */
    a2ax_error error;    /* the exchange's first MPI error: it stops posting, and drains what it posted */
    int cancelled;       /* after an error: its receives in flight were cancelled */
    MPI_Request fence;   /* after an error and the drain: a barrier, so no rank starts another exchange while a
                            peer's cancelled receive could still match its messages */
    long nmessages;
    void (*then)(void *, a2ax_error);
    void *arg;
    a2ax_plan *next;     /* in the executor thread's list of exchanges in flight */
    round_t *rounds;     /* this rank's rounds, first_copy/first_message/first_wait into the arrays below */
    copy_t *copies;
    posted *messages;
    MPI_Request *requests;
    long *waits;
    int *contiguous;     /* a round that waits for exactly its own messages: its requests in place */
    MPI_Request *scratch;
    char *temp;
};

static int fail(char *error, size_t room, const char *format, ...) {
    if (error && room) {
        va_list args;
        va_start(args, format);
        vsnprintf(error, room, format, args);
        va_end(args);
    }
    return 1;
}

uint64_t a2ax_fnv(const void *data, size_t length, uint64_t value) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < length; i++) value = (value ^ bytes[i]) * 0x100000001b3ULL;
    return value;
}

typedef struct { const char *at, *end; long line; } cursor;

/* the next line's words: its keyword must be `keyword`; then whole numbers follow, read by number() */
static int begin(cursor *c, const char *keyword, char *error, size_t room) {
    size_t n = strlen(keyword);
    if (c->at >= c->end) return fail(error, room, "it ends before its '%s' line (truncated)", keyword);
    c->line++;
    if ((size_t)(c->end - c->at) < n || strncmp(c->at, keyword, n) != 0 || (c->at[n] != ' ' && c->at[n] != '\n'))
        return fail(error, room, "line %ld: where a '%s' line belongs", c->line, keyword);
    c->at += n;
    return 0;
}

static int number(cursor *c, long *value, char *error, size_t room) {
    while (c->at < c->end && *c->at == ' ') c->at++;
    char *stop;
    if (c->at >= c->end || *c->at == '\n') return fail(error, room, "line %ld: a number is missing", c->line);
    *value = strtol(c->at, &stop, 10);
    if (stop == c->at || (stop < c->end && *stop != ' ' && *stop != '\n'))
        return fail(error, room, "line %ld: not a whole number", c->line);
    c->at = stop;
    return 0;
}

static int finish(cursor *c, char *error, size_t room) {
    while (c->at < c->end && *c->at == ' ') c->at++;
    if (c->at >= c->end || *c->at != '\n') return fail(error, room, "line %ld: more than it should hold", c->line);
    c->at++;
    return 0;
}

static int grow(void **array, long *capacity, long needed, size_t size) {
    if (needed <= *capacity) return 0;
    long more = *capacity ? *capacity : 64;
    while (more < needed) more *= 2;
    void *moved = realloc(*array, (size_t)more * size);
    if (!moved) return 1;
    *array = moved;
    *capacity = more;
    return 0;
}

static int region_at(cursor *c, const long sizes[3], region *r, char *error, size_t room) {
    if (number(c, &r->buffer, error, room) || number(c, &r->first, error, room) || number(c, &r->blocks, error, room))
        return 1;
    if (r->buffer < 0 || r->buffer > 2 || r->first < 0 || r->blocks < 0 || r->first + r->blocks > sizes[r->buffer])
        return fail(error, room, "line %ld: region of %ld blocks from block %ld lies outside buffer %ld (%ld blocks)",
                    c->line, r->blocks, r->first, r->buffer, (r->buffer >= 0 && r->buffer <= 2) ? sizes[r->buffer] : 0);
    return 0;
}

typedef struct { long rounds, messages, regions, waits; } capacities;

static int parse_program(cursor *c, a2ax_schedule *s, int rank, capacities *room_for, char *error, size_t room) {
    long got, temp, count;
    char word[16];
    if (begin(c, "program", error, room) || number(c, &got, error, room)) return 1;
    if (sscanf(c->at, " %15s", word) != 1 || strcmp(word, "temp") != 0)
        return fail(error, room, "line %ld: a program line is 'program RANK temp N rounds N'", c->line);
    c->at = strstr(c->at, "temp") + 4;
    if (number(c, &temp, error, room)) return 1;
    if (sscanf(c->at, " %15s", word) != 1 || strcmp(word, "rounds") != 0)
        return fail(error, room, "line %ld: a program line is 'program RANK temp N rounds N'", c->line);
    c->at = strstr(c->at, "rounds") + 6;
    if (number(c, &count, error, room) || finish(c, error, room)) return 1;
    if (got != rank || temp < 0 || count < 0)
        return fail(error, room, "line %ld: program %ld where rank %d's belongs", c->line, got, rank);
    long sizes[3] = {s->nprocs, s->nprocs, temp}, posted_so_far = 0;
    s->programs[rank] = (program){temp, s->nrounds, count};
    for (long k = 0; k < count; k++) {
        long head[4];
        if (begin(c, "round", error, room)) return 1;
        for (int i = 0; i < 4; i++)
            if (number(c, &head[i], error, room)) return 1;
        if (head[0] < 0 || head[1] < 0 || head[2] < 0 || head[3] < 0)
            return fail(error, room, "line %ld: negative counts in a round line", c->line);
        if (grow((void **)&s->rounds, &room_for->rounds, s->nrounds + 1, sizeof(round_t)) ||
            grow((void **)&s->waits, &room_for->waits, s->nwaits + head[3], sizeof(long)))
            return fail(error, room, "out of memory");
        round_t *r = &s->rounds[s->nrounds++];
        posted_so_far += head[1] + head[2];
        *r = (round_t){s->nregions, head[0], s->nmessages, head[1], head[2], s->nwaits, head[3]};
        for (long w = 0; w < head[3]; w++) {
            if (number(c, &s->waits[s->nwaits], error, room)) return 1;
            if (s->waits[s->nwaits] < 0 || s->waits[s->nwaits] >= posted_so_far)
                return fail(error, room, "line %ld: rank %d waits for a message not yet posted", c->line, rank);
            s->nwaits++;
        }
        if (finish(c, error, room)) return 1;
        if (grow((void **)&s->regions, &room_for->regions, s->nregions + 2 * head[0], sizeof(region)))
            return fail(error, room, "out of memory");
        for (long i = 0; i < head[0]; i++) {
            region *pair = &s->regions[s->nregions];
            if (begin(c, "copy", error, room) || region_at(c, sizes, &pair[0], error, room) ||
                region_at(c, sizes, &pair[1], error, room) || finish(c, error, room))
                return 1;
            if (pair[0].blocks != pair[1].blocks)
                return fail(error, room, "line %ld: a copy of %ld blocks into %ld", c->line, pair[0].blocks,
                            pair[1].blocks);
            s->nregions += 2;
        }
        for (long i = 0; i < head[1] + head[2]; i++) {
            long n;
            if (grow((void **)&s->messages, &room_for->messages, s->nmessages + 1, sizeof(message)))
                return fail(error, room, "out of memory");
            message *m = &s->messages[s->nmessages++];
            if (begin(c, i < head[1] ? "recv" : "send", error, room) || number(c, &m->peer, error, room) ||
                number(c, &m->tag, error, room) || number(c, &n, error, room))
                return 1;
            if (m->peer < 0 || m->peer >= s->nprocs || m->tag < 0 || n < 0)
                return fail(error, room, "line %ld: peer %ld (of %d ranks), tag %ld or %ld regions out of range",
                            c->line, m->peer, s->nprocs, m->tag, n);
            if (grow((void **)&s->regions, &room_for->regions, s->nregions + n, sizeof(region)))
                return fail(error, room, "out of memory");
            m->first_region = s->nregions;
            m->regions = n;
            for (long j = 0; j < n; j++)
                if (region_at(c, sizes, &s->regions[s->nregions++], error, room)) return 1;
            if (finish(c, error, room)) return 1;
        }
    }
    return 0;
}

int a2ax_parse(const char *text, size_t length, a2ax_schedule **schedule, char *error, size_t room) {
    static const char magic[] = "a2a-schedule ";
    *schedule = NULL;
    if (length < sizeof magic - 1 || memcmp(text, magic, sizeof magic - 1) != 0)
        return fail(error, room, "not an a2a schedule (it does not begin 'a2a-schedule')");
    long version = strtol(text + sizeof magic - 1, NULL, 10);
    if (version != A2AX_VERSION)
        return fail(error, room, "format version %ld; this reader reads %d", version, A2AX_VERSION);
    const char *end = NULL;
    for (const char *p = text + length - 1; p > text; p--)
        if (p[-1] == '\n' && length - (size_t)(p - text) >= 4 && memcmp(p, "end ", 4) == 0) { end = p; break; }
    if (!end || text[length - 1] != '\n') return fail(error, room, "it has no 'end' line (truncated)");
    char stated[17] = {0}, computed[17];
    unsigned long long sum = a2ax_fnv(text, (size_t)(end - text), A2AX_FNV_BASIS);
    snprintf(computed, sizeof computed, "%016llx", sum);
    if (sscanf(end + 4, "%16s", stated) != 1 || strcmp(stated, computed) != 0)
        return fail(error, room, "checksum %s does not match its contents (%s): altered or cut", stated, computed);
    a2ax_schedule *s = calloc(1, sizeof *s);
    if (!s) return fail(error, room, "out of memory");
    cursor c = {strchr(text, '\n') + 1, end, 1};
    capacities capacity = {0, 0, 0, 0};
    long nprocs;
    int bad = begin(&c, "algorithm", error, room);
    if (!bad) {
        int n = 0;
        bad = sscanf(c.at, " %127s%n", s->algorithm, &n) != 1;
        c.at = bad ? c.at : strchr(c.at, '\n') + 1;
        if (bad) fail(error, room, "line %ld: no algorithm named", c.line);
    }
    bad = bad || begin(&c, "nprocs", error, room) || number(&c, &nprocs, error, room) || finish(&c, error, room);
    if (!bad && (nprocs < 1 || nprocs > INT_MAX)) bad = fail(error, room, "nprocs %ld is out of range", nprocs);
    if (!bad) {
        s->nprocs = (int)nprocs;
        s->programs = calloc((size_t)nprocs, sizeof(program));
        if (!s->programs) bad = fail(error, room, "out of memory");
    }
    for (int rank = 0; !bad && rank < s->nprocs; rank++) bad = parse_program(&c, s, rank, &capacity, error, room);
    if (!bad && c.at != end) bad = fail(error, room, "line %ld: more than %d programs", c.line + 1, s->nprocs);
    if (bad) {
        a2ax_schedule_free(s);
        return 1;
    }
    *schedule = s;
    return 0;
}

int a2ax_load(const char *path, a2ax_schedule **schedule, char *error, size_t room) {
    *schedule = NULL;
    FILE *file = fopen(path, "rb");
    if (!file) return fail(error, room, "schedule file %s: cannot be opened", path);
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    rewind(file);
    char *text = length >= 0 ? malloc((size_t)length + 1) : NULL;
    int bad = !text || fread(text, 1, (size_t)length, file) != (size_t)length;
    fclose(file);
    if (bad) {
        free(text);
        return fail(error, room, "schedule file %s: cannot be read", path);
    }
    text[length] = 0;
    char why[400];
    bad = a2ax_parse(text, (size_t)length, schedule, why, sizeof why);
    free(text);
    return bad ? fail(error, room, "schedule file %s: %s", path, why) : 0;
}

int a2ax_nprocs(const a2ax_schedule *s) { return s->nprocs; }
long a2ax_tags(const a2ax_schedule *s) {
    long most = -1;
    for (long i = 0; i < s->nmessages; i++) most = s->messages[i].tag > most ? s->messages[i].tag : most;
    return most + 1;
}
void a2ax_tag_from(a2ax_plan *p, int first) { p->first_tag = first; }
const char *a2ax_algorithm(const a2ax_schedule *s) { return s->algorithm; }
long a2ax_temp_blocks(const a2ax_schedule *s, int rank) {
    return rank >= 0 && rank < s->nprocs ? s->programs[rank].temp : -1;
}

void a2ax_schedule_free(a2ax_schedule *s) {
    if (!s) return;
    free(s->programs);
    free(s->rounds);
    free(s->messages);
    free(s->regions);
    free(s->waits);
    free(s);
}

typedef struct { char *base[3]; const MPI_Aint *offsets[3], *lengths[3]; MPI_Aint block; } buffers;

/* block i of a region's buffer: its address and bytes */
static char *block_at(const buffers *b, long buffer, long i, MPI_Aint *bytes) {
    if (buffer == TEMP) {
        *bytes = b->block;
        return b->base[TEMP] + i * b->block;
    }
    *bytes = b->lengths[buffer][i];
    return b->base[buffer] + b->offsets[buffer][i];
}

/* a message's regions as one (address, count, datatype): its bytes if contiguous, else an hindexed datatype from its
   lowest address (not absolute from MPI_BOTTOM: MPICH sends such a datatype through its shared-memory cells, two
   copies, where one relative to its buffer goes by its single-copy path, CMA) */
static int describe(const a2ax_schedule *s, const message *m, const buffers *b, posted *out, char *error,
                    size_t room) {
    long pieces = 0, capacity = 0;
    MPI_Aint *where = NULL, *sizes = NULL;
    for (long r = 0; r < m->regions; r++) {
        const region *g = &s->regions[m->first_region + r];
        for (long i = g->first; i < g->first + g->blocks; i++) {
            MPI_Aint bytes;
            char *at = block_at(b, g->buffer, i, &bytes);
            if (bytes == 0) continue;
            if (pieces && where[pieces - 1] + sizes[pieces - 1] == (MPI_Aint)(intptr_t)at) {
                sizes[pieces - 1] += bytes;
                continue;
            }
            long before = capacity;
            MPI_Aint *more = NULL;
            if (grow((void **)&where, &capacity, pieces + 1, sizeof(MPI_Aint)) ||
                (capacity != before && (more = realloc(sizes, (size_t)capacity * sizeof(MPI_Aint))) == NULL)) {
                free(where);
                free(sizes);
                return fail(error, room, "out of memory");
            }
            sizes = more ? more : sizes;
            where[pieces] = (MPI_Aint)(intptr_t)at;
            sizes[pieces++] = bytes;
        }
    }
    out->peer = (int)m->peer;
    out->tag = (int)m->tag;
    out->owned = 0;
    int bad = 0;
    if (pieces <= 1) {
        out->buf = pieces ? (void *)(intptr_t)where[0] : b->base[RECV];
        out->type = MPI_BYTE;
        if (pieces && sizes[0] > INT_MAX) bad = fail(error, room, "a message of %ld bytes: over INT_MAX", (long)sizes[0]);
        out->count = pieces ? (int)sizes[0] : 0;
    } else {
        int *lengths = malloc((size_t)pieces * sizeof(int));
        MPI_Aint *displacements = malloc((size_t)pieces * sizeof(MPI_Aint)), lowest = where[0];
        for (long i = 1; i < pieces; i++)
            if (where[i] < lowest) lowest = where[i];
        for (long i = 0; lengths && displacements && i < pieces; i++) {
            if (sizes[i] > INT_MAX) bad = fail(error, room, "a block of %ld bytes: over INT_MAX", (long)sizes[i]);
            lengths[i] = (int)sizes[i];
            displacements[i] = MPI_Aint_diff(where[i], lowest);
        }
        if (!lengths || !displacements) bad = fail(error, room, "out of memory");
        if (!bad && pieces <= INT_MAX) {
            a2ax_error made = {MPI_SUCCESS, NULL};
            if (A2AX_CHECKED(&made, MPI_Type_create_hindexed((int)pieces, lengths, displacements, MPI_BYTE,
                                                             &out->type)) == MPI_SUCCESS &&
                A2AX_CHECKED(&made, MPI_Type_commit(&out->type)) != MPI_SUCCESS)
                A2AX_CHECKED(&made, MPI_Type_free(&out->type));
            if (made.code) bad = fail(error, room, "%.*s failed (MPI error %d)", a2ax_call_name(made.call),
                                      made.call, made.code);
            out->owned = !made.code;
            out->buf = (void *)(intptr_t)lowest;
            out->count = 1;
        }
        free(lengths);
        free(displacements);
    }
    free(where);
    free(sizes);
    return bad;
}

/* a2ax_prepare's work; dup: whether the plan runs on its own duplicate of comm, else on comm itself */
static int prepare(const a2ax_schedule *s, MPI_Comm comm, int dup, const void *sendbuf, const MPI_Aint *send_offsets,
                   const MPI_Aint *send_lengths, void *recvbuf, const MPI_Aint *recv_offsets,
                   const MPI_Aint *recv_lengths, MPI_Aint temp_block, a2ax_plan **out, char *error, size_t room) {
    int size, rank;
    *out = NULL;
    if (A2AX_CHECKED(NULL, MPI_Comm_size(comm, &size)) || A2AX_CHECKED(NULL, MPI_Comm_rank(comm, &rank)))
        return fail(error, room, "MPI_Comm_size or MPI_Comm_rank failed on the communicator");
    if (size != s->nprocs)
        return fail(error, room, "the schedule is for %d ranks; the communicator has %d", s->nprocs, size);
    const program *mine = &s->programs[rank];
    if (mine->temp && temp_block < 0)
        return fail(error, room, "%s forwards blocks through a temporary buffer: its blocks must all be of one size "
                    "(an alltoall)", s->algorithm);
    a2ax_plan *p = calloc(1, sizeof *p);
    if (!p) return fail(error, room, "out of memory");
    atomic_init(&p->idle, 1);
    p->fence = MPI_REQUEST_NULL;
    buffers b = {{(char *)(intptr_t)sendbuf, recvbuf, NULL}, {send_offsets, recv_offsets, NULL},
                 {send_lengths, recv_lengths, NULL}, temp_block};
    long nmessages = 0, ncopies = 0, nwaits = 0;
    const round_t *rounds = &s->rounds[mine->first_round];
    for (long k = 0; k < mine->rounds; k++) {
        nmessages += rounds[k].receives + rounds[k].sends;
        nwaits += rounds[k].waits;
        for (long i = 0; i < rounds[k].copies; i++) ncopies += s->regions[rounds[k].first_copy + 2 * i].blocks;
    }
    p->nrounds = mine->rounds;
    p->nmessages = nmessages;
    p->rounds = calloc((size_t)mine->rounds + 1, sizeof(round_t));
    p->copies = calloc((size_t)ncopies + 1, sizeof(copy_t));
    p->messages = calloc((size_t)nmessages + 1, sizeof(posted));
    p->requests = malloc(((size_t)nmessages + 1) * sizeof(MPI_Request));
    p->scratch = malloc(((size_t)nmessages + 1) * sizeof(MPI_Request));
    p->waits = calloc((size_t)nwaits + 1, sizeof(long));
    p->contiguous = calloc((size_t)mine->rounds + 1, sizeof(int));
    p->temp = malloc((size_t)(mine->temp * (temp_block > 0 ? temp_block : 0)) + 1);
    b.base[TEMP] = p->temp;
    int bad = !p->rounds || !p->copies || !p->messages || !p->requests || !p->scratch || !p->waits ||
              !p->contiguous || !p->temp;
    if (bad) fail(error, room, "out of memory");
    long c = 0, m = 0, w = 0;
    for (long k = 0; !bad && k < mine->rounds; k++) {
        const round_t *r = &rounds[k];
        long base = m;
        p->rounds[k] = (round_t){c, 0, m, r->receives, r->sends, w, r->waits};
        for (long i = 0; i < r->copies; i++) {
            const region *from = &s->regions[r->first_copy + 2 * i], *to = from + 1;
            for (long j = 0; !bad && j < from->blocks; j++) {
                MPI_Aint a, z;
                const char *source = block_at(&b, from->buffer, from->first + j, &a);
                char *target = block_at(&b, to->buffer, to->first + j, &z);
                if (a != z) bad = fail(error, room, "a copy between blocks of %ld and %ld bytes", (long)a, (long)z);
                p->copies[c++] = (copy_t){target, source, (size_t)a};
            }
        }
        p->rounds[k].copies = c - p->rounds[k].first_copy;
        for (long i = 0; !bad && i < r->receives + r->sends; i++, m++)
            bad = describe(s, &s->messages[r->first_message + i], &b, &p->messages[m], error, room);
        int contiguous = r->waits == r->receives + r->sends;
        for (long i = 0; i < r->waits; i++) {
            p->waits[w + i] = s->waits[r->first_wait + i];
            contiguous = contiguous && p->waits[w + i] == base + i;
        }
        p->contiguous[k] = contiguous;
        w += r->waits;
    }
    for (long i = 0; p->requests && i < nmessages; i++) p->requests[i] = MPI_REQUEST_NULL;  /* none: out of memory */
    p->comm = comm;
    p->owns_comm = dup;
    if (!bad && dup)
        bad = A2AX_CHECKED(NULL, MPI_Comm_dup(comm, &p->comm)) != MPI_SUCCESS &&
              fail(error, room, "MPI_Comm_dup failed");
    if (bad) {
        p->nrounds = p->nmessages = 0;
        for (long i = 0; i < m; i++)
            if (p->messages[i].owned) A2AX_CHECKED(NULL, MPI_Type_free(&p->messages[i].type));
        p->comm = MPI_COMM_NULL;
        a2ax_free(p);
        return 1;
    }
    *out = p;
    return 0;
}

int a2ax_prepare(const a2ax_schedule *s, MPI_Comm comm, const void *sendbuf, const MPI_Aint *send_offsets,
                 const MPI_Aint *send_lengths, void *recvbuf, const MPI_Aint *recv_offsets,
                 const MPI_Aint *recv_lengths, MPI_Aint temp_block, a2ax_plan **out, char *error, size_t room) {
    return prepare(s, comm, 1, sendbuf, send_offsets, send_lengths, recvbuf, recv_offsets, recv_lengths, temp_block,
                   out, error, room);
}

int a2ax_bind(const a2ax_schedule *s, MPI_Comm comm, const void *sendbuf, const MPI_Aint *send_offsets,
              const MPI_Aint *send_lengths, void *recvbuf, const MPI_Aint *recv_offsets, const MPI_Aint *recv_lengths,
              MPI_Aint temp_block, a2ax_plan **out, char *error, size_t room) {
    return prepare(s, comm, 0, sendbuf, send_offsets, send_lengths, recvbuf, recv_offsets, recv_lengths, temp_block,
                   out, error, room);
}

int a2ax_prepare_alltoall(const a2ax_schedule *s, MPI_Comm comm, const void *sendbuf, void *recvbuf, MPI_Aint block,
                          a2ax_plan **out, char *error, size_t room) {
    MPI_Aint *offsets = malloc((size_t)s->nprocs * sizeof(MPI_Aint)), *lengths = malloc((size_t)s->nprocs * sizeof(MPI_Aint));
    if (!offsets || !lengths) {
        free(offsets);
        free(lengths);
        return fail(error, room, "out of memory");
    }
    for (int i = 0; i < s->nprocs; i++) {
        offsets[i] = i * block;
        lengths[i] = block;
    }
    int bad = a2ax_prepare(s, comm, sendbuf, offsets, lengths, recvbuf, offsets, lengths, block, out, error, room);
    free(offsets);
    free(lengths);
    return bad;
}

/* round k: its copies, then its receives and sends posted (up to the first that fails: p->error) */
static void post(a2ax_plan *p, long k) {
    const round_t *r = &p->rounds[k];
    for (long i = r->first_copy; i < r->first_copy + r->copies; i++)
        memcpy(p->copies[i].to, p->copies[i].from, p->copies[i].bytes);
    for (long i = r->first_message; i < r->first_message + r->receives + r->sends; i++) {
        posted *m = &p->messages[i];
        int code = i < r->first_message + r->receives
                       ? A2AX_CHECKED(&p->error, MPI_Irecv(m->buf, m->count, m->type, m->peer, m->tag + p->first_tag,
                                                           p->comm, &p->requests[i]))
                       : A2AX_CHECKED(&p->error, MPI_Isend(m->buf, m->count, m->type, m->peer, m->tag + p->first_tag,
                                                           p->comm, &p->requests[i]));
        if (code != MPI_SUCCESS) {
            p->requests[i] = MPI_REQUEST_NULL; /* nothing was posted */
            return;
        }
    }
}

enum draining { WAIT, TEST, PEEK }; /* MPI_Wait; MPI_Test; look without entering MPI's progress (inside it) */

/* one request completed as `how` says (a request that fails again is not waited for twice); whether it is */
static int finished(a2ax_plan *p, MPI_Request *request, enum draining how) {
    int done = 1;
#ifdef A2AX_MPI_PROGRESS
    if (how == PEEK && !MPIX_Request_is_complete(*request)) return 0;
#endif
    if (how == WAIT) A2AX_CHECKED(&p->error, MPI_Wait(request, MPI_STATUS_IGNORE));
    else A2AX_CHECKED(&p->error, MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) *request = MPI_REQUEST_NULL;
    return done;
}

/* after an error: the receives still in flight cancelled (once), every posted request completed (`how`: waited for,
   tested, or, inside MPI's progress, tested only once it is complete), then a barrier of the ranks that met the error
   (a failure every rank meets at the same call) completed alike; whether all that is done */
static int drained(a2ax_plan *p, enum draining how) {
    for (long k = 0; !p->cancelled && k < p->nrounds; k++)
        for (long i = p->rounds[k].first_message; i < p->rounds[k].first_message + p->rounds[k].receives; i++)
            if (p->requests[i] != MPI_REQUEST_NULL) A2AX_CHECKED(&p->error, MPI_Cancel(&p->requests[i]));
    p->cancelled += !p->cancelled; /* 1: cancelled; 2: the barrier posted */
    for (long i = 0; i < p->nmessages; i++)
        if (p->requests[i] != MPI_REQUEST_NULL && !finished(p, &p->requests[i], how)) return 0;
    if (p->cancelled == 1 && A2AX_CHECKED(&p->error, MPI_Ibarrier(p->comm, &p->fence)) != MPI_SUCCESS)
        p->fence = MPI_REQUEST_NULL;
    p->cancelled = 2;
    return p->fence == MPI_REQUEST_NULL || finished(p, &p->fence, how);
}

/* complete the current round's waits (block: MPI_Waitall, else MPI_Testall); whether they completed */
static int complete(a2ax_plan *p, int block) {
    const round_t *r = &p->rounds[p->current];
    int flag = 1;
    if (r->waits == 0) return 1;
    if (p->contiguous[p->current]) {
        MPI_Request *own = &p->requests[r->first_message];
        if (block) A2AX_CHECKED(&p->error, MPI_Waitall((int)r->waits, own, MPI_STATUSES_IGNORE));
        else A2AX_CHECKED(&p->error, MPI_Testall((int)r->waits, own, &flag, MPI_STATUSES_IGNORE));
        return flag;
    }
    const long *waits = &p->waits[r->first_wait];
    for (long i = 0; i < r->waits; i++) p->scratch[i] = p->requests[waits[i]];
    if (block) A2AX_CHECKED(&p->error, MPI_Waitall((int)r->waits, p->scratch, MPI_STATUSES_IGNORE));
    else A2AX_CHECKED(&p->error, MPI_Testall((int)r->waits, p->scratch, &flag, MPI_STATUSES_IGNORE));
    for (long i = 0; i < r->waits; i++) p->requests[waits[i]] = p->scratch[i];
    return flag;
}

/* advance the exchange: while the current round's waits are complete, the next round is posted (block: wait for
   them, else test); whether the exchange is complete */
static int advance(a2ax_plan *p, int block) {
    while (!p->error.code && p->current < p->nrounds && complete(p, block))
        if (++p->current < p->nrounds) post(p, p->current);
    if (p->error.code && drained(p, block ? WAIT : TEST)) p->current = p->nrounds; /* it stops at its first error */
    return p->current == p->nrounds;
}

/* the end of an exchange: the plan is idle (its last access here), then the caller's then(arg) */
static void ended(a2ax_plan *p) {
    void (*then)(void *, a2ax_error) = p->then;
    void *arg = p->arg;
    a2ax_error error = p->error;
    atomic_store_explicit(&p->idle, 1, memory_order_release);
    if (then) then(arg, error);
}

/* ---- how started exchanges progress (executor.h) ---- */

static int mode_of(void) {
    static _Atomic int mode = -1;
    int m = atomic_load(&mode);
    if (m >= 0) return m;
    const char *asked = getenv("A2A_EXECUTOR_PROGRESS");
    int level = MPI_THREAD_SINGLE;
    if (A2AX_CHECKED(NULL, MPI_Query_thread(&level)) != MPI_SUCCESS) level = MPI_THREAD_SINGLE;
#ifdef A2AX_MPI_PROGRESS
    m = A2AX_BY_MPI;
#else
    m = A2AX_BY_TEST;
#endif
    if (asked && strcmp(asked, "test") == 0) m = A2AX_BY_TEST;
    if (asked && strcmp(asked, "thread") == 0) m = level == MPI_THREAD_MULTIPLE ? A2AX_BY_THREAD : A2AX_BY_TEST;
    atomic_store(&mode, m);
    return m;
}

int a2ax_progress_mode(void) { return mode_of(); }

#ifdef A2AX_MPI_PROGRESS
/* whether the current round's waits are complete, looked at without entering MPI's progress: this runs inside it,
   and MPICH 5.0's progress engine must not be entered again from a poll function (docs/executor.md) */
static int arrived(const a2ax_plan *p) {
    const round_t *r = &p->rounds[p->current];
    for (long i = 0; i < r->waits; i++) {
        long k = p->contiguous[p->current] ? r->first_message + i : p->waits[r->first_wait + i];
        if (!MPIX_Request_is_complete(p->requests[k])) return 0;
    }
    return 1;
}

/* each round whose messages all arrived completed (MPI_Testall of complete requests releases them without entering
   progress) and the next posted; whether the exchange is complete */
static int quietly(a2ax_plan *p) {
    while (!p->error.code && p->current < p->nrounds && arrived(p) && complete(p, 0))
        if (++p->current < p->nrounds) post(p, p->current);
    if (p->error.code && drained(p, PEEK)) p->current = p->nrounds;
    return p->current == p->nrounds;
}

/* MPICH's progress engine calls this while the exchange is in flight. Should an MPI call made here ever enter
   progress, MPICH 5.0 would call the polls again from inside this one: those inner calls do nothing. */
static int polled(MPIX_Async_thing thing) {
    static _Thread_local int inside;
    a2ax_plan *p = MPIX_Async_get_state(thing);
    if (inside) return MPIX_ASYNC_NOPROGRESS;
    inside = 1;
    int done = quietly(p);
    inside = 0;
    if (!done) return MPIX_ASYNC_NOPROGRESS;
    ended(p);
    return MPIX_ASYNC_DONE;
}
#endif

/* the executor's thread (A2AX_BY_THREAD): one per process, started with the first exchange, advancing every exchange
   in flight by MPI_Testall until it completes */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work, finished;
    int started;
    a2ax_plan *list;
} runner = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};

static void *run_exchanges(void *unused) {
    (void)unused;
    pthread_mutex_lock(&runner.lock);
    for (;;) {
        while (!runner.list) pthread_cond_wait(&runner.work, &runner.lock);
        for (a2ax_plan **at = &runner.list; *at;) {
            a2ax_plan *p = *at;
            if (!advance(p, 0)) {
                at = &p->next;
                continue;
            }
            *at = p->next;
            ended(p);
            pthread_cond_broadcast(&runner.finished);
        }
        pthread_mutex_unlock(&runner.lock); /* start() and wait() take it between passes */
        sched_yield();
        pthread_mutex_lock(&runner.lock);
    }
    return NULL;
}

static int hand_to_runner(a2ax_plan *p) {
    pthread_mutex_lock(&runner.lock);
    pthread_t thread;
    int bad = !runner.started && pthread_create(&thread, NULL, run_exchanges, NULL) != 0;
    if (!bad && !runner.started) pthread_detach(thread);
    runner.started = !bad;
    if (!bad) {
        p->next = runner.list;
        runner.list = p;
        pthread_cond_signal(&runner.work);
    }
    pthread_mutex_unlock(&runner.lock);
    return bad;
}

void a2ax_progress(void) {
#ifdef A2AX_MPI_PROGRESS
    if (mode_of() == A2AX_BY_MPI) A2AX_CHECKED(NULL, MPIX_Stream_progress(MPIX_STREAM_NULL));
#endif
}

/* post round 0 and hand the exchange to what progresses it; where nothing can, it completes here */
static int begin_exchange(a2ax_plan *p, void (*then)(void *, a2ax_error), void *arg) {
    if (!atomic_load_explicit(&p->idle, memory_order_acquire)) return 1;
    int mode = mode_of();
    p->current = 0;
    p->error = (a2ax_error){MPI_SUCCESS, NULL};
    p->cancelled = 0;
    p->then = then;
    p->arg = arg;
    atomic_store_explicit(&p->idle, 0, memory_order_relaxed);
    if (p->nrounds) post(p, 0);
    if (mode == A2AX_BY_TEST) return 0;
#ifdef A2AX_MPI_PROGRESS
    if (mode == A2AX_BY_MPI && quietly(p)) { /* nothing to wait for (one rank: copies only; eager messages) */
        ended(p);
        return 0;
    }
    if (mode == A2AX_BY_MPI && A2AX_CHECKED(NULL, MPIX_Async_start(polled, p, MPIX_STREAM_NULL)) == MPI_SUCCESS)
        return 0;
#endif
    if (mode == A2AX_BY_THREAD && hand_to_runner(p) == 0) return 0;
    advance(p, 1); /* the hook or the thread could not be had: blocking, never left unprogressed */
    ended(p);
    return 0;
}

int a2ax_start(a2ax_plan *p) { return begin_exchange(p, NULL, NULL); }

int a2ax_start_then(a2ax_plan *p, void (*then)(void *, a2ax_error), void *arg) {
    if (mode_of() == A2AX_BY_TEST) return 1;
    return begin_exchange(p, then, arg);
}

int a2ax_busy(const a2ax_plan *p) { return !atomic_load_explicit(&p->idle, memory_order_acquire); }

const int *a2ax_state(const a2ax_plan *p) { return (const int *)&p->idle; }

int a2ax_test(a2ax_plan *p, int *done) {
    if (mode_of() == A2AX_BY_TEST && !atomic_load_explicit(&p->idle, memory_order_relaxed) && advance(p, 0))
        ended(p);
    if (mode_of() == A2AX_BY_MPI && !atomic_load_explicit(&p->idle, memory_order_acquire)) a2ax_progress();
    *done = atomic_load_explicit(&p->idle, memory_order_acquire);
    return *done ? p->error.code : MPI_SUCCESS;
}

int a2ax_wait(a2ax_plan *p) {
    int mode = mode_of();
    if (mode == A2AX_BY_TEST && !atomic_load_explicit(&p->idle, memory_order_relaxed)) {
        advance(p, 1);
        ended(p);
    } else if (mode == A2AX_BY_THREAD) {
        pthread_mutex_lock(&runner.lock);
        while (!atomic_load_explicit(&p->idle, memory_order_acquire)) pthread_cond_wait(&runner.finished, &runner.lock);
        pthread_mutex_unlock(&runner.lock);
    }
    /* A2AX_BY_MPI: MPI's progress engine polls the exchange; the polls that find nothing yield the core now and then,
       as MPI_Wait does, so that ranks sharing cores run */
    for (int polls = 1; !atomic_load_explicit(&p->idle, memory_order_acquire); polls++) {
        a2ax_progress();
        if (polls % 16 == 0) sched_yield();
    }
    return p->error.code;
}

int a2ax_run(a2ax_plan *p) {
    if (!atomic_load_explicit(&p->idle, memory_order_acquire)) return MPI_ERR_PENDING;
    p->current = 0;
    p->error = (a2ax_error){MPI_SUCCESS, NULL};
    p->cancelled = 0;
    if (p->nrounds) post(p, 0);
    advance(p, 1);
    return p->error.code;
}

a2ax_error a2ax_failed(const a2ax_plan *p) { return p->error; }

const char *a2ax_failed_call(const a2ax_plan *p) { return p->error.call; }

int a2ax_free(a2ax_plan *p) {
    if (!p) return 0;
    if (a2ax_busy(p)) a2ax_wait(p);
    long nmessages = 0;
    for (long k = 0; k < p->nrounds; k++) nmessages += p->rounds[k].receives + p->rounds[k].sends;
    for (long i = 0; i < nmessages; i++)
        if (p->messages[i].owned) A2AX_CHECKED(NULL, MPI_Type_free(&p->messages[i].type));
    if (p->owns_comm && p->comm != MPI_COMM_NULL) A2AX_CHECKED(NULL, MPI_Comm_free(&p->comm));
    free(p->rounds);
    free(p->copies);
    free(p->messages);
    free(p->requests);
    free(p->scratch);
    free(p->waits);
    free(p->contiguous);
    free(p->temp);
    free(p);
    return 0;
}
