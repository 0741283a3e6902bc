/* liba2a's Fortran bindings.
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

#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <dlfcn.h>

typedef void fortran_entry(void);

/* the entry points intercepted, and the names each has (the library's own, looked up at its first call) */
enum fortran_call { F_INIT, F_INIT_THREAD, F_FINALIZE, F_ALLTOALL, F_ALLTOALLV, F_CALLS };
enum { LOWER_, LOWER__, LOWER, UPPER, F08, VARIANTS }; /* mpi_x_, mpi_x__, mpi_x, MPI_X, mpi_x_f08_ */
static const char *const fortran_names[F_CALLS][VARIANTS] = {
    {"mpi_init_", "mpi_init__", "mpi_init", "MPI_INIT", "mpi_init_f08_"},
    {"mpi_init_thread_", "mpi_init_thread__", "mpi_init_thread", "MPI_INIT_THREAD", "mpi_init_thread_f08_"},
    {"mpi_finalize_", "mpi_finalize__", "mpi_finalize", "MPI_FINALIZE", "mpi_finalize_f08_"},
    {"mpi_alltoall_", "mpi_alltoall__", "mpi_alltoall", "MPI_ALLTOALL", "mpi_alltoall_f08_"},
    {"mpi_alltoallv_", "mpi_alltoallv__", "mpi_alltoallv", "MPI_ALLTOALLV", "mpi_alltoallv_f08_"}};
static fortran_entry *next_entries[F_CALLS][VARIANTS];

/* the library's own Fortran entry point of this name (the next after liba2a), looked up once (threads that look it
   up together find the same) */
static fortran_entry *next_entry(enum fortran_call call, int variant) {
    fortran_entry *next = __atomic_load_n(&next_entries[call][variant], __ATOMIC_ACQUIRE);
    if (!next) {
        *(void **)&next = dlsym(RTLD_NEXT, fortran_names[call][variant]);
        __atomic_store_n(&next_entries[call][variant], next, __ATOMIC_RELEASE);
    }
    return next;
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
    if (!__atomic_load_n(&the.marks_looked, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&the.lock);
        for (int i = 0; !the.marks_looked && i < FORTRAN_MARKS; i++) {
            the.in_place[i] = dlsym(RTLD_DEFAULT, in_place_names[i]);
            the.bottom[i] = dlsym(RTLD_DEFAULT, bottom_names[i]);
            the.marks_known |= the.in_place[i] != NULL && (i < 4 || i == FORTRAN_MARKS - 1);
        }
        __atomic_store_n(&the.marks_looked, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&the.lock);
    }
    if (!the.marks_known) return 0;
    *c = marked(buffer, the.in_place) ? MPI_IN_PLACE : marked(buffer, the.bottom) ? MPI_BOTTOM : buffer;
    return 1;
}

static void fortran_init(enum fortran_call call, int variant, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr) {
    MPI_Fint result = MPI_ERR_OTHER;
    fortran_entry *next = next_entry(call, variant);
    the.fortran = !the.began;
    if (next && required) ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *))next)(required, provided, &result);
    else if (next) ((void (*)(MPI_Fint *))next)(&result);
    if (result == MPI_SUCCESS) started(); /* done already where the library's Fortran calls MPI_Init (MPICH) */
    if (ierr) *ierr = result;
}

static void fortran_finalize(int variant, MPI_Fint *ierr) {
    MPI_Fint result = MPI_ERR_OTHER;
    fortran_entry *next = next_entry(F_FINALIZE, variant);
    finishing();
    if (next) ((void (*)(MPI_Fint *))next)(&result);
    if (ierr) *ierr = result;
}

static void fortran_alltoall(int variant, void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc, MPI_Fint *rt,
                             MPI_Fint *comm, MPI_Fint *ierr) {
    void *send, *recv;
    fortran_entry *next;
    MPI_Fint result = MPI_ERR_OTHER;
    if (fortran_buffer(sb, &send) && fortran_buffer(rb, &recv))
        result = MPI_Alltoall(send, *sc, MPI_Type_f2c(*st), recv, *rc, MPI_Type_f2c(*rt), MPI_Comm_f2c(*comm));
    else if ((next = next_entry(F_ALLTOALL, variant)))
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))next)(
            sb, sc, st, rb, rc, rt, comm, &result);
    if (ierr) *ierr = result;
}

static void fortran_alltoallv(int variant, void *sb, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *rb, MPI_Fint *rc,
                              MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr) {
    void *send, *recv;
    fortran_entry *next;
    MPI_Fint result = MPI_ERR_OTHER;
    if (fortran_buffer(sb, &send) && fortran_buffer(rb, &recv))
        result = MPI_Alltoallv(send, (const int *)sc, (const int *)sd, MPI_Type_f2c(*st), recv, (const int *)rc,
                               (const int *)rd, MPI_Type_f2c(*rt), MPI_Comm_f2c(*comm));
    else if ((next = next_entry(F_ALLTOALLV, variant)))
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))next)(sb, sc, sd, st, rb, rc, rd, rt, comm, &result);
    if (ierr) *ierr = result;
}

/* each entry point under the names Fortran compilers give it: lower case with one, two or no underscores, upper
   case (mpif.h and `use mpi`), and mpi_f08's (MPI_Fint * stands for its TYPE(MPI_Comm) and kin: one integer, by
   reference); the parameter lists (ARGS) are each call's */
#define INIT_THREAD_ARGS MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr
#define ALLTOALL_ARGS void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *comm, \
                            MPI_Fint *ierr
#define ALLTOALLV_ARGS void *sb, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *rb, MPI_Fint *rc, MPI_Fint *rd, \
                             MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr

EXPORT void mpi_init_(MPI_Fint *ierr) { fortran_init(F_INIT, LOWER_, NULL, NULL, ierr); }
EXPORT void mpi_init__(MPI_Fint *ierr) { fortran_init(F_INIT, LOWER__, NULL, NULL, ierr); }
EXPORT void mpi_init(MPI_Fint *ierr) { fortran_init(F_INIT, LOWER, NULL, NULL, ierr); }
EXPORT void MPI_INIT(MPI_Fint *ierr) { fortran_init(F_INIT, UPPER, NULL, NULL, ierr); }
EXPORT void mpi_init_f08_(MPI_Fint *ierr) { fortran_init(F_INIT, F08, NULL, NULL, ierr); }

EXPORT void mpi_init_thread_(INIT_THREAD_ARGS) { fortran_init(F_INIT_THREAD, LOWER_, required, provided, ierr); }
EXPORT void mpi_init_thread__(INIT_THREAD_ARGS) { fortran_init(F_INIT_THREAD, LOWER__, required, provided, ierr); }
EXPORT void mpi_init_thread(INIT_THREAD_ARGS) { fortran_init(F_INIT_THREAD, LOWER, required, provided, ierr); }
EXPORT void MPI_INIT_THREAD(INIT_THREAD_ARGS) { fortran_init(F_INIT_THREAD, UPPER, required, provided, ierr); }
EXPORT void mpi_init_thread_f08_(INIT_THREAD_ARGS) { fortran_init(F_INIT_THREAD, F08, required, provided, ierr); }

EXPORT void mpi_finalize_(MPI_Fint *ierr) { fortran_finalize(LOWER_, ierr); }
EXPORT void mpi_finalize__(MPI_Fint *ierr) { fortran_finalize(LOWER__, ierr); }
EXPORT void mpi_finalize(MPI_Fint *ierr) { fortran_finalize(LOWER, ierr); }
EXPORT void MPI_FINALIZE(MPI_Fint *ierr) { fortran_finalize(UPPER, ierr); }
EXPORT void mpi_finalize_f08_(MPI_Fint *ierr) { fortran_finalize(F08, ierr); }

EXPORT void mpi_alltoall_(ALLTOALL_ARGS) { fortran_alltoall(LOWER_, sb, sc, st, rb, rc, rt, comm, ierr); }
EXPORT void mpi_alltoall__(ALLTOALL_ARGS) { fortran_alltoall(LOWER__, sb, sc, st, rb, rc, rt, comm, ierr); }
EXPORT void mpi_alltoall(ALLTOALL_ARGS) { fortran_alltoall(LOWER, sb, sc, st, rb, rc, rt, comm, ierr); }
EXPORT void MPI_ALLTOALL(ALLTOALL_ARGS) { fortran_alltoall(UPPER, sb, sc, st, rb, rc, rt, comm, ierr); }
EXPORT void mpi_alltoall_f08_(ALLTOALL_ARGS) { fortran_alltoall(F08, sb, sc, st, rb, rc, rt, comm, ierr); }

EXPORT void mpi_alltoallv_(ALLTOALLV_ARGS) { fortran_alltoallv(LOWER_, sb, sc, sd, st, rb, rc, rd, rt, comm, ierr); }
EXPORT void mpi_alltoallv__(ALLTOALLV_ARGS) { fortran_alltoallv(LOWER__, sb, sc, sd, st, rb, rc, rd, rt, comm, ierr); }
EXPORT void mpi_alltoallv(ALLTOALLV_ARGS) { fortran_alltoallv(LOWER, sb, sc, sd, st, rb, rc, rd, rt, comm, ierr); }
EXPORT void MPI_ALLTOALLV(ALLTOALLV_ARGS) { fortran_alltoallv(UPPER, sb, sc, sd, st, rb, rc, rd, rt, comm, ierr); }
EXPORT void mpi_alltoallv_f08_(ALLTOALLV_ARGS) { fortran_alltoallv(F08, sb, sc, sd, st, rb, rc, rd, rt, comm, ierr); }
