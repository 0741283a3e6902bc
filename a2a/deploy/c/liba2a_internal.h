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
 *
 * The library's parts, one job each (this header holds what they share):
 *   liba2a_parser.c       the deploy file read and checked
 *   liba2a_state.c        each communicator's state: what the file serves on it, its private copy, kept plans
 *   liba2a_serve.c        MPI_Alltoall(v) and their large-count forms: served, or passed to the library
 *   liba2a_nonblocking.c  the private copies and plans of the non-blocking and persistent forms
 *   liba2a_requests.c     MPI_Ialltoall(v), MPI_Alltoall_init and their requests (MPI_Start, MPI_Request_free)
 *   liba2a_learn.c        the learners of `learn` lines over the calls, and the learned file (A2A_LEARN_OUT)
 *   liba2a_store.c        the store of evidence many jobs share (A2A_LEARN_DIR)
 *   liba2a_learnv.c       the learners of `learn alltoallv` lines: the class of each call agreed at block ends
 *   liba2a_record.c       what the program exchanged (A2A_RECORD)
 *   liba2a_report.c       the report at MPI_Finalize (A2A_DEPLOY_REPORT)
 *   liba2a_init.c         MPI_Init(_thread) and MPI_Finalize: the library checked, the settings read
 *   liba2a_fortran.c      the Fortran bindings of the same calls
 */
#ifndef LIBA2A_INTERNAL_H
#define LIBA2A_INTERNAL_H

#define _GNU_SOURCE /* dladdr, RTLD_NEXT, open_memstream */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <mpi.h>

#include "executor.h" /* the executor it runs schedules with (a2a/execute/c) */
#include "learn.h"    /* the learners of `learn` lines */

#define EXPORT __attribute__((visibility("default")))

#define DEPLOY_VERSION 1 /* the deploy file format read */
#define SLOTS 8          /* prepared plans kept per communicator */
#define NAMED 4          /* predefined datatypes whose size is kept */
#define RECORD_LIMIT 64  /* distinct signatures (sizes, count matrices) recorded per communicator and collective */

enum collective { ALLTOALL, ALLTOALLV, COLLECTIVES };
extern const char *const collective_name[COLLECTIVES];

enum reason { NO_FILE, EMPTY, INTERCOMM, IN_PLACE, DATATYPE, SIGNATURE, COLLECTIVE, NPROCS, LAYOUT, SIZE, LIBRARY,
              PREPARE, NONBLOCKING, PERSISTENT, PRIVATE_COPY, LEARNING, LEARNING_NO_CHOICE, REASONS };
extern const char *const reason_text[REASONS];

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

/* where a size class's evidence before this run came from */
enum evidence_source { FROM_NOTHING, FROM_FILE, FROM_STORE };

/* a size class of a learn entry on a communicator: its learner, and the arm a library visit stands for */
typedef struct learning {
    const entry *e;
    long long low, high;
    int arm;
    learner l;
    long long before[3]; /* calls, exploring and revisiting calls of earlier runs (a learned line's) */
    int ordinal;         /* its communicator's place among this rank's of its size to learn the class (1, 2, ...) */
    long long own[LEARN_ARMS]; /* values this run added: to the library's series (0), to each candidate's ratios */
    double cost_before;  /* the cost its evidence carried in (a learned line's, or the store's) */
    int from;            /* enum evidence_source: the file's learned line, the store (A2A_LEARN_DIR), or none */
    int *layout;         /* its communicator's node layout, where A2A_LEARN_DIR keeps its evidence (else NULL) */
    struct comm_state *c;
    struct learning *next;
} learning;

/* a communicator's learned alltoallv calls (liba2a_learnv.c): the size class they agreed on last, the same on every
   rank (it changes only where the ranks agreed), and the block in progress's largest block per visit */
typedef struct {
    learning *at;                          /* the agreed class's learner; NULL: none agreed, or out of the range */
    long long since, agreements, probes, aside; /* calls since the last agreement; agreements; of them probes;
                                              rounds set aside (calls of different classes) */
    double largest;                        /* this rank's largest block (bytes to one peer) in the call in flight */
    double bytes[LEARN_BLOCK][LEARN_ARMS]; /* each visit's largest block: this rank's, then any rank's */
} learnedv_t;

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
    learnedv_t v;        /* its learned alltoallv calls' agreed class (liba2a_learnv.c) */
    struct comm_state *next;
} comm_state;

typedef struct { MPI_Datatype type; MPI_Count size; } named_type;

#define FORTRAN_MARKS 6 /* names of Fortran's MPI_IN_PLACE (and MPI_BOTTOM) among the libraries */

/* the library's one state per process: what MPI_Init found (written there, only read after), the counts (each
   changed atomically: counted), every communicator met (the list changed under `lock`) */
typedef struct {
    int ready, began, refused, fortran, keyval, report, recording, ncomms, marks_looked, marks_known;
    void *in_place[FORTRAN_MARKS], *bottom[FORTRAN_MARKS]; /* Fortran's, looked up at its first all-to-all */
    deploy_t *deploy;
    learn_settings learn;
    char path[1024], record[1024], job[64], learn_out[1024];
    char learn_dir[1024]; /* A2A_LEARN_DIR: the store many jobs share (liba2a_store.c), "" where none is in use */
    struct stored *stored; /* the store's evidence of this job's MPI library, merged per class */
    long long seen[COLLECTIVES], passed[COLLECTIVES][REASONS], *served; /* served: per collective, per schedule */
    comm_state *states;
    int thread_level; /* MPI_Query_thread's, after MPI_Init */
    pthread_mutex_t lock; /* held to change what threads share: the list of states, the non-blocking lists */
} liba2a_state;
extern liba2a_state the;

/* liba2a_parser.c */
int fail(char *error, size_t room, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* a learned line, after its word (learned_line writes it): 0, else 1 */
int parse_learned(char *line, learned_t *k);
const char *family(const char *version);
int read_deploy(const char *path, const char *library, deploy_t **out, char *error, size_t room);
void free_deploy(deploy_t *d);

/* liba2a_state.c */
comm_state *state_of(MPI_Comm comm);
int forget(MPI_Comm comm, int keyval, void *value, void *extra);
int *layout_of(comm_state *c);
void free_plans(comm_state *c);
const entry *chosen(const comm_state *c, int collective, long long bytes, int *why);
a2ax_plan *prepared(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks);
a2ax_plan *bound(comm_state *c, int k, const void *send, void *recv, MPI_Aint block, const MPI_Aint *blocks);
MPI_Count plain_size(MPI_Datatype type);
int passed(int collective, int reason);
/* one more of a count that threads share (the counts of seen, passed and served calls): atomic where threads may
   call at once, a plain increment (no locked instruction on every call) where MPI lets one call at a time */
static inline void counted(long long *count) {
    if (the.thread_level == MPI_THREAD_MULTIPLE) __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
    else ++*count;
}
/* whether liba2a does anything with a call but count it (a deploy file or a recording, after MPI_Init) */
static inline int liba2a_runs(void) { return the.ready && (the.deploy || the.recording); }

/* liba2a_serve.c */
/* a served exchange's MPI error `code` handed to the program as MPI hands its own: through comm's error handler
   (MPI_ERRORS_ARE_FATAL: the job ends, after a line on stderr naming `call`, the schedule and the MPI call `failed`
   in it; MPI_ERRORS_RETURN: returned); the code */
int handed_to_program(MPI_Comm comm, int code, const char *call, const char *schedule, const char *failed);
/* whether comm's error handler ends the job (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ABORT); and the line said then */
int fatal_handler(MPI_Comm comm);
void said_failed(const char *call, const char *schedule, const char *failed, int code);
enum number_kind { INTS, AINTS, COUNTS }; /* how an alltoallv's counts or displacements are held */
/* the blocks of an alltoallv in bytes (send offsets, lengths, receive offsets, lengths) and the row sent, in
   elements (NULL, *row NULL: no memory, or a communicator the library will refuse) */
MPI_Aint *alltoallv_blocks(MPI_Comm comm, const void *sc, const void *sd, MPI_Datatype st, const void *rc,
                           const void *rd, MPI_Datatype rt, enum number_kind counts, enum number_kind displs,
                           long long **row);

/* liba2a_learn.c */
int same_layout(const int *a, const int *b, int nprocs);
/* the learning of e's size class [low, high] on c, found, else made at its first call (collective on c's private
   copy where the store is used: every rank makes it at the same call) from the store's evidence, else the file's
   learned line, else afresh with `seed`; NULL: no memory */
learning *learning_at(comm_state *c, const entry *e, long long low, long long high, unsigned long long seed);
int learned_call(comm_state *c, const entry *e, const void *send, void *recv, MPI_Count bytes, int *result,
                 learning **timing, int *schedule, a2ax_error *failure);
void visited(learning *g, int arm, double seconds);
/* the completed rounds of the blocks in progress on c agreed and kept (blocking: MPI_Comm_free's delete callback) */
void rounds_kept(comm_state *c);
/* at MPI_Finalize, those of every communicator's: one MPI_Iallreduce each, all posted before any is waited for */
void rounds_kept_at_end(void);
void learned_out(void);
/* the live arms of g's class where this run's calls of it, exploring, were too few for any round (a warm-up of each
   candidate, then a visit of each arm), else 0: runs like this one never learn the class */
int too_few(const learning *g);
/* a learned line: `word` (e.g. "learned "), then the class and the learner's state and evidence */
void learned_line(FILE *out, const char *word, int collective, int nprocs, const int *layout, long long low,
                  long long high, const learner *l);

/* liba2a_store.c: A2A_LEARN_DIR */
/* at MPI_Init, on every rank of MPI_COMM_WORLD (collective): the store read and merged on rank 0 (compacted where
   it holds many files), its evidence of this job's MPI library sent to every rank and merged per class; a folder
   that cannot be used said in one line on rank 0, and left (the.learn_dir emptied on every rank) */
void store_opened(int rank);
/* the store's merged learner for e's class at `low` on a communicator of this node layout, or NULL */
const learner *stored_learner(const entry *e, const int *layout, long long low);
/* at MPI_Finalize, rank 0: what this job added (its rounds and calls, not what it read) as one new file */
void store_written(void);
void store_closed(void);

/* liba2a_learnv.c */
/* c's alltoallv entry where it is a learn entry (an alltoallv's size is no rank's to know: chosen() cannot match it) */
const entry *learnv_entry(const comm_state *c);
/* learned_call's alltoallv form: the arm the agreed class's learner names runs with these blocks */
int learnedv_call(comm_state *c, const entry *e, const void *send, void *recv, const MPI_Aint *blocks, int *result,
                  learning **timing, int *schedule, a2ax_error *failure);
/* visited()'s alltoallv form: the visit's largest block agreed with its time at the block's end */
void visitedv(learning *g, int arm, double seconds);
#define AGREED_V (2 * LEARN_BLOCK * LEARN_ARMS + 1) /* an alltoallv block's agreement: times, largest blocks, ordinal */
/* g's part of its block's agreement (the maximum over the ranks is taken): this rank's times, each visit's largest
   block, the ordinal; AGREED_V numbers */
void packedv(learning *g, double *agreed);
/* the agreed block judged (its rounds of another class set aside, the rest decided); `ok` 0: the agreement failed
   (MPI said why): the library's own serves the class from here */
void judgedv(learning *g, const double *agreed, int ok);

/* liba2a_record.c */
void recorded(MPI_Comm comm, int collective, MPI_Datatype st, MPI_Datatype rt, long long count, const long long *row,
              double seconds);
void write_records(void);

/* liba2a_report.c */
void print_report(void);

/* liba2a_init.c */
/* whether a deploy file has a learn line (every rank reads the same file: alike on every rank) */
int learns(const deploy_t *d);
/* the next definition of an MPI function after liba2a's: a tool preloaded after it (a profiler's MPI_Init, its
   MPI_Alltoall), else the MPI library's own; looked up once into *next. NULL where none is found: liba2a then calls
   the function's PMPI_ name */
void *next_mpi(const char *name, void **next);
void started(void);
void finishing(void);

/* liba2a_nonblocking.c, liba2a_requests.c: the non-blocking and persistent forms, served where the executor
   progresses inside MPI (A2AX_MPI_PROGRESS) */
void nonblocking_finalized(void);
#ifdef A2AX_MPI_PROGRESS
typedef struct nb_state {
    comm_state c;            /* its private copy (MPI_Comm_idup), candidates and kept plans, as a blocking call's */
    MPI_Request making;      /* the MPI_Comm_idup in flight, MPI_REQUEST_NULL once waited for */
    int persistents, orphan; /* persistent requests that run on it; its communicator was freed while they live */
    int broken;              /* its private copy could not be made: its calls pass through */
    unsigned long starts;    /* exchanges started on it: the next one's slot of tags */
    struct nb_state *next;
} nb_state;

typedef struct { /* a served MPI_Ialltoall(v): its generalized request, plan, and how its exchange ended */
    MPI_Request request;
    a2ax_plan *plan;
    int transient, fatal, error; /* fatal: the communicator's handler ends the job; error: the exchange's first */
    const char *call, *schedule;
} pending;

typedef struct persistent { /* a served MPI_Alltoall_init: the program's request, its plan */
    MPI_Request request;
    a2ax_plan *plan;
    int tag;
    MPI_Comm comm; /* the program's, whose error handler a failed exchange is handed to */
    const char *schedule;
    nb_state *state;
    struct persistent *next;
} persistent;

#define TAG_SLOTS 65536 /* at most: exchanges in flight together on one communicator, each with tags of its own */

typedef struct {
    int keyval, ready;
    unsigned tags;
    MPI_Comm self; /* where a persistent request's zero-byte message goes from this rank to itself */
    nb_state *states;
    persistent *persistents;
    long tag_stride, tag_slots; /* the tags one exchange of any schedule of the file uses; how many such slots */
} nonblocking_t;
extern nonblocking_t nb;

void release(nb_state *s);
a2ax_plan *planned_nonblocking(int collective, const void *send, void *recv, MPI_Count send_bytes,
                               MPI_Count recv_bytes, MPI_Datatype st, MPI_Datatype rt, const MPI_Aint *blocks,
                               MPI_Comm comm, int own_plan, int *transient, nb_state **state, int *why,
                               const char **schedule);
void next_tags(nb_state *s, a2ax_plan *plan);
void persistent_freed(persistent *r);
#endif

#endif
