/* The schedule executor: runs an all-to-all schedule held as data (a2a/schedules/program.py describes the file).
 *
 * A schedule file holds every rank's program: rounds of local copies, then receives and sends posted at once,
 * then a wait for the messages the round names. Regions are in blocks of the send, receive or a temporary
 * buffer, so one file serves every message size. The executor holds no algorithm: any schedule runs here.
 *
 *   a2ax_load / a2ax_parse     read and check a schedule file (a wrong version, a truncated or altered file, a
 *                              region outside its buffer: refused, with one line saying why)
 *   a2ax_prepare               bind buffers (offsets and lengths of each block, in bytes), build the messages'
 *                              datatypes once, duplicate the communicator (collective)
 *   a2ax_bind                  the same on a communicator the caller keeps private to its exchanges, one at a time
 *                              (local: no collective call; a2ax_free leaves that communicator alone)
 *   a2ax_run                   one exchange, blocking
 *   a2ax_start/test/wait       one exchange in flight: start posts the first round; each next round is posted
 *                              once its inputs are in, by whatever progresses it (a2ax_progress_mode, below);
 *                              test says whether it is complete, wait returns once it is
 *   a2ax_start_then            the same, and then(arg) is called once it is complete, by what completed it (an MPI
 *                              library's progress engine, the executor's thread): what a generalized request needs
 *   a2ax_free                  release the plan (collective: it frees the duplicated communicator)
 *   a2ax_tags / a2ax_tag_from  the tags a schedule's messages use (0 to a2ax_tags - 1), and a plan's exchanges
 *                              started from now on shifted by FIRST: exchanges in flight together on one
 *                              communicator, each with tags of its own, never match each other's messages
 *
 * How a started exchange progresses, one way per process (a2ax_progress_mode):
 *   A2AX_BY_MPI     MPICH 4.3 and later (MPIX_Async_start): MPICH's progress engine polls each exchange in flight,
 *                   so any MPI call of the process, and MPICH's progress thread (MPIR_CVAR_ASYNC_PROGRESS=1), post
 *                   its next rounds; test reads its state and, if not complete, lets MPI poll once
 *   A2AX_BY_THREAD  the executor's own thread posts them (A2A_EXECUTOR_PROGRESS=thread, under MPI_THREAD_MULTIPLE);
 *                   test reads the state
 *   A2AX_BY_TEST    test and wait post them (a library without the hook, no thread asked for or possible)
 * A2A_EXECUTOR_PROGRESS=test|thread|mpi chooses among those this library and the thread level allow.
 *
 * Every function returns 0, or a nonzero code with a line in `error` (room bytes) where it takes one. An exchange's
 * MPI errors come back as codes where the communicator's error handler returns them (MPI_ERRORS_RETURN, which liba2a
 * sets on its private communicators): a2ax_run, a2ax_wait and a2ax_test (once complete) return the first MPI error
 * the exchange met (MPI_SUCCESS: none), a2ax_failed_call names the call that returned it, and the exchange stops
 * there having completed or cancelled what it posted (its receives cancelled, then every request waited for), so a
 * failure every rank meets at the same call leaves none of them waiting.
 */
#ifndef A2A_EXECUTOR_H
#define A2A_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#define A2AX_VERSION 1

typedef struct a2ax_schedule a2ax_schedule;
typedef struct a2ax_plan a2ax_plan;

/* The one way the executor and liba2a call MPI: A2AX_CHECKED(first, CALL) makes CALL and is its result; where it
   failed and *first holds no error yet, *first keeps its code and the call (its text, up to its first '(' its name) */
typedef struct { int code; const char *call; } a2ax_error;
static inline int a2ax_checked(int code, const char *call, a2ax_error *first) {
    if (code != MPI_SUCCESS && first && first->code == MPI_SUCCESS) first->code = code, first->call = call;
    return code;
}
#define A2AX_CHECKED(first, call) a2ax_checked((call), #call, (first))
/* the length of the name at the start of an a2ax_error's call text */
static inline int a2ax_call_name(const char *call) {
    int n = 0;
    while (call && call[n] && call[n] != '(' && call[n] != ' ') n++;
    return n;
}

int a2ax_parse(const char *text, size_t length, a2ax_schedule **schedule, char *error, size_t room);
int a2ax_load(const char *path, a2ax_schedule **schedule, char *error, size_t room);
int a2ax_nprocs(const a2ax_schedule *schedule);
long a2ax_tags(const a2ax_schedule *schedule);
const char *a2ax_algorithm(const a2ax_schedule *schedule);
long a2ax_temp_blocks(const a2ax_schedule *schedule, int rank);
void a2ax_schedule_free(a2ax_schedule *schedule);

/* offsets[i], lengths[i]: where block i of the buffer lies, in bytes; temp_block: the bytes of a temporary block
   (a schedule that uses the temporary buffer needs every block of that size) */
int a2ax_prepare(const a2ax_schedule *schedule, MPI_Comm comm, const void *sendbuf, const MPI_Aint *send_offsets,
                 const MPI_Aint *send_lengths, void *recvbuf, const MPI_Aint *recv_offsets,
                 const MPI_Aint *recv_lengths, MPI_Aint temp_block, a2ax_plan **plan, char *error, size_t room);
/* the same for an alltoall: block i at i x block bytes in both buffers */
int a2ax_prepare_alltoall(const a2ax_schedule *schedule, MPI_Comm comm, const void *sendbuf, void *recvbuf,
                          MPI_Aint block, a2ax_plan **plan, char *error, size_t room);
int a2ax_bind(const a2ax_schedule *schedule, MPI_Comm comm, const void *sendbuf, const MPI_Aint *send_offsets,
              const MPI_Aint *send_lengths, void *recvbuf, const MPI_Aint *recv_offsets, const MPI_Aint *recv_lengths,
              MPI_Aint temp_block, a2ax_plan **plan, char *error, size_t room);
/* one exchange, blocking: MPI_SUCCESS, the first MPI error it met, or MPI_ERR_PENDING (an exchange in flight) */
int a2ax_run(a2ax_plan *plan);
int a2ax_start(a2ax_plan *plan);
/* *done: whether the exchange is complete; then its first MPI error (MPI_SUCCESS: none) */
int a2ax_test(a2ax_plan *plan, int *done);
/* once the exchange is complete: its first MPI error (MPI_SUCCESS: none) */
int a2ax_wait(a2ax_plan *plan);
/* the first MPI error of the plan's last exchange, and the call that returned it (call NULL: none) */
a2ax_error a2ax_failed(const a2ax_plan *plan);
/* its call's text, for a binding that cannot take a structure (NULL: none) */
const char *a2ax_failed_call(const a2ax_plan *plan);
int a2ax_free(a2ax_plan *plan);
void a2ax_tag_from(a2ax_plan *plan, int first);

/* MPICH with MPIX_Async_start (4.3 and later): exchanges progress inside MPI */
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40300000
#define A2AX_MPI_PROGRESS 1
#endif

enum { A2AX_BY_TEST = 0, A2AX_BY_THREAD = 1, A2AX_BY_MPI = 2 };
/* how exchanges started in this process progress (decided at the first call, after MPI_Init) */
int a2ax_progress_mode(void);
/* start an exchange and call then(arg, its first MPI error) once it is complete, from whatever completes it: MPI's
   progress engine or the executor's thread (another thread, maybe), or this call when it completes at once. After
   then() the plan may be started again or freed. Nonzero, and nothing started, in A2AX_BY_TEST mode (nothing would
   complete it unasked) or while the plan has an exchange in flight. */
int a2ax_start_then(a2ax_plan *plan, void (*then)(void *, a2ax_error), void *arg);
/* whether the plan has an exchange in flight (started, not yet complete) */
int a2ax_busy(const a2ax_plan *plan);
/* the plan's state word, 1 once no exchange is in flight: read without a call (an acquiring a2ax_test follows) */
const int *a2ax_state(const a2ax_plan *plan);
/* let the progress of started exchanges advance once (A2AX_BY_MPI: one poll of MPI's progress engine; else nothing) */
void a2ax_progress(void);

/* FNV-1a (64 bits) of `length` bytes, continuing from `value` (A2AX_FNV_BASIS to begin): the checksum of schedule
   and deploy files (a2a/schedules/program.py computes the same) */
#define A2AX_FNV_BASIS 0xcbf29ce484222325ULL
uint64_t a2ax_fnv(const void *data, size_t length, uint64_t value);

#endif
