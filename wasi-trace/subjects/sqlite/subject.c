/* SQLite as a crash-check subject, compiled for WASI preview 1 with the amalgamation
 * (wasi-trace's tests build it: clang --target=wasm32-wasi, then wasmtime's adapter).
 *
 *   sqlite-subject write full|off ROWS   ROWS inserts into $SUBJECT_DIR/db.sqlite (default
 *                                        /data), rollback journal, synchronous=FULL or OFF,
 *                                        one transaction each; "row N" promised after each
 *   sqlite-subject check                 the image at $IMAGE_DIR: the database passes
 *                                        integrity_check and holds every promised row
 *                                        ($MARKS, one per line); exit 1 with why otherwise
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sqlite3.h"

static const char *dir_of(const char *var) {
    const char *d = getenv(var);
    return d ? d : "/data";
}

/* The "unix-none" VFS: no locking. The WASI build's default locks with a dot-file (a
 * directory, db.sqlite.lock) that a power cut leaves behind, after which every open says
 * "database is locked" until it is removed by hand. One process owns the database here, so
 * the check looks at the data instead. */
static int open_db(const char *path, sqlite3 **db) {
    return sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix-none");
}

static int fail(const char *what, sqlite3 *db) {
    printf("%s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    return 1;
}

static void value_of(int i, char *out, size_t n) {
    snprintf(out, n, "row %d %0200d", i, i);
}

static int mark(int i) {
    const char *p = getenv("SEQSTORE_TRACE_MARKS");
    if (!p) return 0;
    FILE *f = fopen(p, "a");
    if (!f) return 1;
    fprintf(f, "row %d\n", i);
    return fclose(f) != 0;
}

static int write_rows(const char *mode, int rows) {
    char path[512], sql[512], v[300];
    sqlite3 *db;
    snprintf(path, sizeof path, "%s/db.sqlite", dir_of("SUBJECT_DIR"));
    if (open_db(path, &db) != SQLITE_OK) return fail("open", db);
    snprintf(sql, sizeof sql,
             "PRAGMA journal_mode=DELETE; PRAGMA synchronous=%s;"
             "CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, v TEXT NOT NULL);",
             strcmp(mode, "full") == 0 ? "FULL" : "OFF");
    if (sqlite3_exec(db, sql, 0, 0, 0) != SQLITE_OK) return fail("setup", db);
    for (int i = 1; i <= rows; i++) {
        sqlite3_stmt *st;
        value_of(i, v, sizeof v);
        if (sqlite3_prepare_v2(db, "INSERT INTO t(k, v) VALUES(?, ?)", -1, &st, 0) != SQLITE_OK)
            return fail("prepare", db);
        sqlite3_bind_int(st, 1, i);
        sqlite3_bind_text(st, 2, v, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE) return fail("insert", db);
        sqlite3_finalize(st);
        if (mark(i)) { printf("cannot write the marks file\n"); return 1; }
    }
    return sqlite3_close(db) != SQLITE_OK;
}

static int promised(void) {
    const char *m = getenv("MARKS");
    int k = 0;
    while (m && *m) {
        int n;
        if (sscanf(m, "row %d", &n) == 1 && n > k) k = n;
        const char *nl = strchr(m, '\n');
        m = nl ? nl + 1 : 0;
    }
    return k;
}

static int check(void) {
    char path[512], v[300];
    int k = promised();
    sqlite3 *db;
    snprintf(path, sizeof path, "%s/db.sqlite", dir_of("IMAGE_DIR"));
    FILE *f = fopen(path, "r");
    if (!f) {
        if (k == 0) return 0;
        printf("db.sqlite is missing, %d rows were promised\n", k);
        return 1;
    }
    fclose(f);
    if (open_db(path, &db) != SQLITE_OK) return fail("open", db);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, 0) != SQLITE_OK)
        return fail("integrity_check", db);
    if (sqlite3_step(st) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
        printf("integrity_check fails\n");
        return 1;
    }
    sqlite3_finalize(st);
    if (k == 0) return 0;
    if (sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &st, 0) != SQLITE_OK)
        return fail("select", db);
    for (int i = 1; i <= k; i++) {
        value_of(i, v, sizeof v);
        sqlite3_bind_int(st, 1, i);
        if (sqlite3_step(st) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), v) != 0) {
            printf("row %d is missing or wrong, %d were promised\n", i, k);
            return 1;
        }
        sqlite3_reset(st);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "write") == 0) return write_rows(argv[2], atoi(argv[3]));
    if (argc == 2 && strcmp(argv[1], "check") == 0) return check();
    fprintf(stderr, "usage: sqlite-subject write full|off ROWS | check\n");
    return 2;
}
