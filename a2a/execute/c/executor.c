/* The schedule executor (executor.h): a schedule file's programs run as rounds of MPI requests. */
#include "executor.h"

#include <limits.h>
#include <stdarg.h>
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
    int active, owns_comm;
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
            MPI_Type_create_hindexed((int)pieces, lengths, displacements, MPI_BYTE, &out->type);
            MPI_Type_commit(&out->type);
            out->owned = 1;
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
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    if (size != s->nprocs)
        return fail(error, room, "the schedule is for %d ranks; the communicator has %d", s->nprocs, size);
    const program *mine = &s->programs[rank];
    if (mine->temp && temp_block < 0)
        return fail(error, room, "%s forwards blocks through a temporary buffer: its blocks must all be of one size "
                    "(an alltoall)", s->algorithm);
    a2ax_plan *p = calloc(1, sizeof *p);
    if (!p) return fail(error, room, "out of memory");
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
    for (long i = 0; i < nmessages; i++) p->requests[i] = MPI_REQUEST_NULL;
    p->comm = comm;
    p->owns_comm = dup;
    if (!bad && dup) bad = MPI_Comm_dup(comm, &p->comm) != MPI_SUCCESS && fail(error, room, "MPI_Comm_dup failed");
    if (bad) {
        p->nrounds = 0;
        for (long i = 0; i < m; i++)
            if (p->messages[i].owned) MPI_Type_free(&p->messages[i].type);
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

/* round k: its copies, then its receives and sends posted */
static void post(a2ax_plan *p, long k) {
    const round_t *r = &p->rounds[k];
    for (long i = r->first_copy; i < r->first_copy + r->copies; i++)
        memcpy(p->copies[i].to, p->copies[i].from, p->copies[i].bytes);
    for (long i = r->first_message; i < r->first_message + r->receives; i++) {
        posted *m = &p->messages[i];
        MPI_Irecv(m->buf, m->count, m->type, m->peer, m->tag, p->comm, &p->requests[i]);
    }
    for (long i = r->first_message + r->receives; i < r->first_message + r->receives + r->sends; i++) {
        posted *m = &p->messages[i];
        MPI_Isend(m->buf, m->count, m->type, m->peer, m->tag, p->comm, &p->requests[i]);
    }
}

/* complete the current round's waits (block: MPI_Waitall, else MPI_Testall); whether they completed */
static int complete(a2ax_plan *p, int block) {
    const round_t *r = &p->rounds[p->current];
    int flag = 1;
    if (r->waits == 0) return 1;
    if (p->contiguous[p->current]) {
        MPI_Request *own = &p->requests[r->first_message];
        if (block) MPI_Waitall((int)r->waits, own, MPI_STATUSES_IGNORE);
        else MPI_Testall((int)r->waits, own, &flag, MPI_STATUSES_IGNORE);
        return flag;
    }
    const long *waits = &p->waits[r->first_wait];
    for (long i = 0; i < r->waits; i++) p->scratch[i] = p->requests[waits[i]];
    if (block) MPI_Waitall((int)r->waits, p->scratch, MPI_STATUSES_IGNORE);
    else MPI_Testall((int)r->waits, p->scratch, &flag, MPI_STATUSES_IGNORE);
    for (long i = 0; i < r->waits; i++) p->requests[waits[i]] = p->scratch[i];
    return flag;
}

int a2ax_start(a2ax_plan *p) {
    if (p->active) return 1;
    p->current = 0;
    p->active = p->nrounds > 0;
    if (p->active) post(p, 0);
    return 0;
}

static int advance(a2ax_plan *p, int block) {
    while (p->active && complete(p, block)) {
        if (++p->current == p->nrounds) p->active = 0;
        else post(p, p->current);
    }
    return !p->active;
}

int a2ax_test(a2ax_plan *p, int *done) {
    *done = advance(p, 0);
    return 0;
}

int a2ax_wait(a2ax_plan *p) {
    advance(p, 1);
    return 0;
}

int a2ax_run(a2ax_plan *p) {
    if (a2ax_start(p)) return 1;
    return a2ax_wait(p);
}

int a2ax_free(a2ax_plan *p) {
    if (!p) return 0;
    if (p->active) a2ax_wait(p);
    long nmessages = 0;
    for (long k = 0; k < p->nrounds; k++) nmessages += p->rounds[k].receives + p->rounds[k].sends;
    for (long i = 0; i < nmessages; i++)
        if (p->messages[i].owned) MPI_Type_free(&p->messages[i].type);
    if (p->owns_comm && p->comm != MPI_COMM_NULL) MPI_Comm_free(&p->comm);
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
