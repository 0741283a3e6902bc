/* liba2a's MPI_Init(_thread) and MPI_Finalize: the MPI library checked against the one liba2a was built for, the
   settings read (A2A_DEPLOY, A2A_DEPLOY_REPORT, A2A_RECORD, A2A_LEARN_*), and at the end what was kept written */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int learns(const deploy_t *d) {
    for (int i = 0; i < d->nentries; i++)
        if (d->entries[i].learn) return 1;
    return 0;
}

/* the learners' settings from A2A_LEARN_CAP, A2A_LEARN_REVISIT, A2A_LEARN_OUT and A2A_LEARN_DIR: 0, else 1 and why
   in error */
static int learn_settings_read(char *error, size_t room) {
    const char *cap = getenv("A2A_LEARN_CAP"), *revisit = getenv("A2A_LEARN_REVISIT"), *out = getenv("A2A_LEARN_OUT");
    const char *store = getenv("A2A_LEARN_DIR");
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
    if (store && *store && snprintf(the.learn_dir, sizeof the.learn_dir, "%s", store) >= (int)sizeof the.learn_dir)
        return fail(error, room, "A2A_LEARN_DIR is longer than %zu characters", sizeof the.learn_dir - 1);
    return 0;
}

/* what MPI_Init found, said where it cannot be used; once per process, whichever binding's MPI_Init came first */
void started(void) {
    char error[600] = "", why[200], version[MPI_MAX_LIBRARY_VERSION_STRING + 8192] = "";
    int length, rank, size, local[7], all[7];
    const char *deploy = getenv("A2A_DEPLOY"), *report = getenv("A2A_DEPLOY_REPORT"), *record = getenv("A2A_RECORD");
    if (the.began++) return;
    if (PMPI_Get_library_version(version, &length) != MPI_SUCCESS) version[0] = 0; /* unknown: refused below */
    if (PMPI_Query_thread(&the.thread_level) != MPI_SUCCESS) the.thread_level = MPI_THREAD_SINGLE;
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
    local[6] = !the.learn_dir[0]; /* the store is used where every rank names it */
    if (PMPI_Allreduce(local, all, 7, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS || all[5]) {
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
    if (all[6] || !the.deploy) the.learn_dir[0] = 0;
    store_opened(rank); /* collective where a store is named: every rank alike */
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

void *next_mpi(const char *name, void **next) {
    void *found = __atomic_load_n(next, __ATOMIC_ACQUIRE);
    if (!found && (found = dlsym(RTLD_NEXT, name)) != NULL) __atomic_store_n(next, found, __ATOMIC_RELEASE);
    return found;
}

EXPORT int MPI_Init(int *argc, char ***argv) {
    static void *next;
    global_library(__builtin_return_address(0));
    int (*init)(int *, char ***) = next_mpi("MPI_Init", &next);
    int result = init ? init(argc, argv) : PMPI_Init(argc, argv);
    if (result == MPI_SUCCESS) started();
    return result;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    static void *next;
    global_library(__builtin_return_address(0));
    int (*init)(int *, char ***, int, int *) = next_mpi("MPI_Init_thread", &next);
    int result = init ? init(argc, argv, required, provided) : PMPI_Init_thread(argc, argv, required, provided);
    if (result == MPI_SUCCESS) started();
    return result;
}

/* what MPI_Finalize does before the library's: the recording, the report, the communicators' states freed */
void finishing(void) {
    if (the.ready) {
        nonblocking_finalized();
        rounds_kept_at_end(); /* the report and the learned file then count them */
        if (the.recording) write_records();
        if (the.report) print_report();
        store_written();
        learned_out();
        store_closed();
        for (comm_state *c = the.states; c; c = c->next)
            if (!c->freed) A2AX_CHECKED(NULL, PMPI_Comm_delete_attr(c->comm, the.keyval));
        A2AX_CHECKED(NULL, PMPI_Comm_free_keyval(&the.keyval));
        free_deploy(the.deploy);
        the.deploy = NULL;
        the.ready = 0;
    }
}

EXPORT int MPI_Finalize(void) {
    static void *next;
    int (*finalize)(void) = next_mpi("MPI_Finalize", &next);
    finishing();
    return finalize ? finalize() : PMPI_Finalize();
}
