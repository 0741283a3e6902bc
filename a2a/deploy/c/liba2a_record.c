/* liba2a's recording (A2A_RECORD): per communicator and call signature, what the program exchanged, written at
   MPI_Finalize as JSON lines (a2a/deploy/recorded.py reads them) */
#include "liba2a_internal.h" /* first: it defines _GNU_SOURCE */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void type_name(MPI_Datatype type, char *name) {
    int length = 0;
    name[0] = 0;
    if (plain_size(type) && PMPI_Type_get_name(type, name, &length) != MPI_SUCCESS) name[0] = 0;
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

void recorded(MPI_Comm comm, int collective, MPI_Datatype st, MPI_Datatype rt, long long count,
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

void write_records(void) {
    int rank;
    FILE *out = NULL;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) {
        fprintf(stderr, "a2a: A2A_RECORD: MPI_Comm_rank failed at MPI_Finalize; nothing is written\n");
        return;
    }
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
