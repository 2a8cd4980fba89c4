/*
 * securestore-bench-c: the C floor of `make bench` (Docs/performance.md, "Against C on SQLCipher").
 *
 *   securestore-bench-c DIRECTORY insert|fetch|toggle|records-fetch|records-insert COUNT [TOTAL]
 *
 * What a peer writing C on SQLCipher would write for the task list's and the records' workloads: the same
 * library, the same file format (securestore-1: 4096-byte pages, HMAC-SHA1, PBKDF2-HMAC-SHA1, a raw 32-byte key),
 * the same connection settings (WAL, synchronous NORMAL, 64 MiB page cache), the same schema (the product's, from
 * the file BENCH_TASK_SCHEMA) and the same SQL, one prepared statement per query, values read into C structs.
 * It measures one run and prints `ms <milliseconds>`; securestore-bench (CBaselineBench.swift) runs it in
 * interleaved pairs with the project's side. The data set is BenchSupport's (BenchTask): the same IDs, titles,
 * flags and dates, computed the same way. The key is the benchmarks' fixed test key (32 bytes of 0x42).
 *
 * Files: DIRECTORY/fetch.db (made by the project's side; fetch and toggle use it), DIRECTORY/records.db
 * (records-fetch), DIRECTORY/c-insert.db and DIRECTORY/c-records-insert.db (made here).
 */
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what, sqlite3 *db) {
    fprintf(stderr, "securestore-bench-c: %s: %s\n", what, db ? sqlite3_errmsg(db) : "");
    exit(1);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void exec(sqlite3 *db, const char *sql) {
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) fail(sql, db);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) fail(sql, db);
    return statement;
}

/* Opens (or creates) `path` in the securestore-1 format with the benchmarks' key. */
static sqlite3 *open_database(const char *path) {
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        fail("open", db);
    char key[80] = "x'";
    for (int i = 0; i < 32; i++) strcat(key, "42");
    strcat(key, "'");
    if (sqlite3_key(db, key, (int)strlen(key)) != SQLITE_OK) fail("key", db);
    /* SQLCipher 4 is told the algorithms; 3.4 has only these and ignores the pragmas. */
    exec(db, "PRAGMA cipher_hmac_algorithm = HMAC_SHA1");
    exec(db, "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA1");
    exec(db, "PRAGMA cipher_page_size = 4096");
    exec(db, "PRAGMA kdf_iter = 64000");
    exec(db, "SELECT count(*) FROM sqlite_master");
    exec(db, "PRAGMA cache_size = -65536");
    exec(db, "PRAGMA journal_mode = WAL");
    exec(db, "PRAGMA synchronous = NORMAL");
    return db;
}

/* BenchSupport's data set: task number `index`. */
struct task {
    unsigned char id[16];
    char title[32];
    int done;
    int64_t microseconds;
};

static uint64_t split_mix(uint64_t index) {
    uint64_t z = 0x5EC05709E0000000ULL + (index + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static const char *words[] = {"Buy", "Call", "Email", "Fix", "Pay", "Read", "Plan", "Book", "Clean", "Write"};

static void make_task(int index, struct task *task) {
    uint64_t high = split_mix((uint64_t)index * 2), low = split_mix((uint64_t)index * 2 + 1);
    for (int i = 0; i < 8; i++) {
        task->id[i] = (unsigned char)(high >> (56 - 8 * i));
        task->id[8 + i] = (unsigned char)(low >> (56 - 8 * i));
    }
    task->id[6] = (task->id[6] & 0x0F) | 0x40;
    task->id[8] = (task->id[8] & 0x3F) | 0x80;
    snprintf(task->title, sizeof task->title, "%s #%d", words[index % 10], index);
    task->done = index % 3 == 0;
    task->microseconds = 1700000000000000LL + (int64_t)index * 1000;
}

static char *read_file(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) fail("cannot read BENCH_TASK_SCHEMA", NULL);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    rewind(file);
    char *text = malloc((size_t)size + 1);
    if (fread(text, 1, (size_t)size, file) != (size_t)size) fail("short read of BENCH_TASK_SCHEMA", NULL);
    text[size] = 0;
    fclose(file);
    return text;
}

static void remove_database(const char *path) {
    char name[4096];
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s", path, suffixes[i]);
        unlink(name);
    }
}

/* The trigger statement named `name` as sqlite_master holds it, or NULL when there is none (malloc'd). */
static char *trigger_sql(sqlite3 *db, const char *name) {
    sqlite3_stmt *select = prepare(db, "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?");
    sqlite3_bind_text(select, 1, name, -1, SQLITE_STATIC);
    char *sql = sqlite3_step(select) == SQLITE_ROW ? strdup((const char *)sqlite3_column_text(select, 0)) : NULL;
    sqlite3_finalize(select);
    return sql;
}

/* The task list's batch insert, with the same SQL as TaskList.insert: the search index's insert trigger (and, the
   index being keyed, its update trigger) is replaced for the batch and the batch indexed in one statement at the
   end (Database.deferringFullTextIndexing, Sources/EncryptedDatabase/FullTextSearch.swift: keep the two in step). */
static double insert_tasks(const char *directory, int count) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c-insert.db", directory);
    remove_database(path);
    sqlite3 *db = open_database(path);
    const char *schema_path = getenv("BENCH_TASK_SCHEMA");
    if (!schema_path) fail("BENCH_TASK_SCHEMA must name the task list's schema", NULL);
    char *schema = read_file(schema_path);
    exec(db, schema);
    free(schema);
    struct task *tasks = malloc(sizeof(struct task) * (size_t)count);
    for (int i = 0; i < count; i++) make_task(i, &tasks[i]);
    double start = now_ms();
    exec(db, "BEGIN IMMEDIATE");
    char *create_insert = trigger_sql(db, "tasks_search_insert");
    if (!create_insert) fail("no tasks_search_insert trigger", db);
    char *create_update = trigger_sql(db, "tasks_search_update");
    exec(db, "CREATE TEMP TABLE IF NOT EXISTS \"tasks_search_deferred\" (docid INTEGER)");
    exec(db, "CREATE TEMP TRIGGER \"tasks_search_deferred_insert\" AFTER INSERT ON main.\"tasks\" BEGIN "
             "INSERT OR ROLLBACK INTO \"tasks_search_keys\" (\"id\") VALUES (NEW.\"id\"); "
             "INSERT INTO \"tasks_search_deferred\" (docid) VALUES (last_insert_rowid()); END");
    if (create_update) {
        exec(db, "CREATE TEMP TABLE IF NOT EXISTS \"tasks_search_deferred_updated\" (docid INTEGER)");
        exec(db, "CREATE TEMP TRIGGER \"tasks_search_deferred_update\" AFTER UPDATE OF \"title\", \"id\" ON main.\"tasks\" BEGIN "
                 "UPDATE OR ROLLBACK \"tasks_search_keys\" SET \"id\" = NEW.\"id\" WHERE \"id\" = OLD.\"id\"; "
                 "INSERT INTO \"tasks_search_deferred_updated\" (docid) SELECT k.docid FROM \"tasks_search_keys\" AS k "
                 "WHERE k.\"id\" = NEW.\"id\"; END");
        exec(db, "DROP TRIGGER \"tasks_search_update\"");
    }
    exec(db, "DROP TRIGGER \"tasks_search_insert\"");
    sqlite3_stmt *insert = prepare(db, "INSERT OR ROLLBACK INTO tasks (created_at, id, title, done) VALUES (?, ?, ?, ?)");
    for (int i = 0; i < count; i++) {
        sqlite3_bind_int64(insert, 1, tasks[i].microseconds);
        sqlite3_bind_blob(insert, 2, tasks[i].id, 16, SQLITE_STATIC);
        sqlite3_bind_text(insert, 3, tasks[i].title, -1, SQLITE_STATIC);
        sqlite3_bind_int(insert, 4, tasks[i].done);
        if (sqlite3_step(insert) != SQLITE_DONE) fail("insert", db);
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    exec(db, "DROP TRIGGER temp.\"tasks_search_deferred_insert\"");
    const char *rows = "(SELECT DISTINCT docid FROM temp.\"tasks_search_deferred\")";
    if (create_update) {
        exec(db, "DROP TRIGGER temp.\"tasks_search_deferred_update\"");
        exec(db, "DELETE FROM main.\"tasks_search\" WHERE docid IN (SELECT docid FROM temp.\"tasks_search_deferred_updated\")");
        rows = "(SELECT docid FROM temp.\"tasks_search_deferred\" UNION SELECT docid FROM temp.\"tasks_search_deferred_updated\")";
    }
    char index_rows[1024];
    snprintf(index_rows, sizeof index_rows,
             "INSERT INTO main.\"tasks_search\" (docid, \"title\") SELECT k.docid, c.\"title\" FROM %s AS p "
             "CROSS JOIN main.\"tasks_search_keys\" AS k ON k.docid = p.docid CROSS JOIN main.\"tasks\" AS c ON c.\"id\" = k.\"id\"",
             rows);
    exec(db, index_rows);
    exec(db, "DROP TABLE temp.\"tasks_search_deferred\"");
    exec(db, create_insert);
    if (create_update) {
        exec(db, "DROP TABLE temp.\"tasks_search_deferred_updated\"");
        exec(db, create_update);
    }
    exec(db, "COMMIT");
    double time = now_ms() - start;
    free(create_insert);
    free(create_update);
    free(tasks);
    sqlite3_close(db);
    remove_database(path);
    return time;
}

/* Every task oldest first, into an array of structs (a fresh connection: SQLCipher's cache cold). */
static double fetch_tasks(const char *directory, int count) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fetch.db", directory);
    sqlite3 *db = open_database(path);
    double start = now_ms();
    struct task *tasks = malloc(sizeof(struct task) * (size_t)count);
    int fetched = 0;
    exec(db, "BEGIN");
    sqlite3_stmt *select = prepare(db, "SELECT id, title, done, created_at FROM tasks ORDER BY created_at, id");
    while (sqlite3_step(select) == SQLITE_ROW) {
        if (fetched == count) fail("more tasks than expected", db);
        struct task *task = &tasks[fetched++];
        if (sqlite3_column_bytes(select, 0) != 16) fail("an ID is not 16 bytes", db);
        memcpy(task->id, sqlite3_column_blob(select, 0), 16);
        snprintf(task->title, sizeof task->title, "%s", (const char *)sqlite3_column_text(select, 1));
        task->done = sqlite3_column_int(select, 2);
        task->microseconds = sqlite3_column_int64(select, 3);
    }
    sqlite3_finalize(select);
    exec(db, "COMMIT");
    double time = now_ms() - start;
    if (fetched != count) fail("fewer tasks than expected", db);
    free(tasks);
    sqlite3_close(db);
    return time;
}

/* One toggle, a transaction: the UPDATE, then the task read back (what TaskList.toggle returns). */
static void toggle_one(sqlite3 *db, sqlite3_stmt *update, sqlite3_stmt *select, int index) {
    struct task task, read;
    make_task(index, &task);
    exec(db, "BEGIN IMMEDIATE");
    sqlite3_bind_blob(update, 1, task.id, 16, SQLITE_STATIC);
    if (sqlite3_step(update) != SQLITE_DONE) fail("toggle", db);
    sqlite3_reset(update);
    sqlite3_bind_blob(select, 1, task.id, 16, SQLITE_STATIC);
    if (sqlite3_step(select) != SQLITE_ROW) fail("toggle: no such task", db);
    memcpy(read.id, sqlite3_column_blob(select, 0), 16);
    snprintf(read.title, sizeof read.title, "%s", (const char *)sqlite3_column_text(select, 1));
    read.done = sqlite3_column_int(select, 2);
    read.microseconds = sqlite3_column_int64(select, 3);
    sqlite3_reset(select);
    exec(db, "COMMIT");
}

/* `count` toggles spread over `total` tasks (BenchSupport's toggleIndexes), after two unmeasured ones (the first
   write of a connection creates the WAL), as the project's side does. */
static double toggle_tasks(const char *directory, int count, int total) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fetch.db", directory);
    sqlite3 *db = open_database(path);
    sqlite3_stmt *update = prepare(db, "UPDATE OR ROLLBACK tasks SET done = 1 - done WHERE id = ?");
    sqlite3_stmt *select = prepare(db, "SELECT id, title, done, created_at FROM tasks WHERE id = ?");
    int modulus = total > 0 ? total : 1;
    toggle_one(db, update, select, 13 % modulus);
    toggle_one(db, update, select, 13 % modulus);
    double start = now_ms();
    for (int round = 0; round < count; round++) toggle_one(db, update, select, (int)(((int64_t)round * 7919 + 13) % modulus));
    double time = now_ms() - start;
    sqlite3_finalize(update);
    sqlite3_finalize(select);
    sqlite3_close(db);
    return time;
}

/* The records workloads' table (Records.swift's benchItemSchema): every row into structs, on a warm connection
   (the project's records-child warms its cache first too). */
static double fetch_records(const char *directory, int count) {
    char path[4096];
    snprintf(path, sizeof path, "%s/records.db", directory);
    sqlite3 *db = open_database(path);
    struct task *items = malloc(sizeof(struct task) * (size_t)count);
    double best = 0;
    for (int round = 0; round < 2; round++) { /* round 0 warms the cache */
        double start = now_ms();
        int fetched = 0;
        exec(db, "BEGIN");
        sqlite3_stmt *select = prepare(db, "SELECT * FROM item");
        while (sqlite3_step(select) == SQLITE_ROW) {
            if (fetched == count) fail("more items than expected", db);
            struct task *item = &items[fetched++];
            memcpy(item->id, sqlite3_column_blob(select, 0), 16);
            snprintf(item->title, sizeof item->title, "%s", (const char *)sqlite3_column_text(select, 1));
            item->done = sqlite3_column_int(select, 2);
            item->microseconds = sqlite3_column_int64(select, 3);
        }
        sqlite3_finalize(select);
        exec(db, "COMMIT");
        if (fetched != count) fail("fewer items than expected", db);
        best = now_ms() - start;
    }
    free(items);
    sqlite3_close(db);
    return best;
}

static double insert_records(const char *directory, int count) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c-records-insert.db", directory);
    remove_database(path);
    sqlite3 *db = open_database(path);
    exec(db, "CREATE TABLE item (id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, isDone INTEGER NOT NULL, "
             "creationDate INTEGER NOT NULL)");
    struct task *items = malloc(sizeof(struct task) * (size_t)count);
    for (int i = 0; i < count; i++) make_task(i, &items[i]);
    double start = now_ms();
    exec(db, "BEGIN IMMEDIATE");
    sqlite3_stmt *insert = prepare(db, "INSERT INTO item (id, title, isDone, creationDate) VALUES (?, ?, ?, ?)");
    for (int i = 0; i < count; i++) {
        sqlite3_bind_blob(insert, 1, items[i].id, 16, SQLITE_STATIC);
        sqlite3_bind_text(insert, 2, items[i].title, -1, SQLITE_STATIC);
        sqlite3_bind_int(insert, 3, items[i].done);
        sqlite3_bind_int64(insert, 4, items[i].microseconds);
        if (sqlite3_step(insert) != SQLITE_DONE) fail("insert", db);
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    exec(db, "COMMIT");
    double time = now_ms() - start;
    free(items);
    sqlite3_close(db);
    remove_database(path);
    return time;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: securestore-bench-c DIRECTORY insert|fetch|toggle|records-fetch|records-insert COUNT [TOTAL]\n");
        return 64;
    }
    const char *directory = argv[1], *workload = argv[2];
    int count = atoi(argv[3]), total = argc > 4 ? atoi(argv[4]) : count;
    double ms;
    if (strcmp(workload, "insert") == 0) ms = insert_tasks(directory, count);
    else if (strcmp(workload, "fetch") == 0) ms = fetch_tasks(directory, count);
    else if (strcmp(workload, "toggle") == 0) ms = toggle_tasks(directory, count, total);
    else if (strcmp(workload, "records-fetch") == 0) ms = fetch_records(directory, count);
    else if (strcmp(workload, "records-insert") == 0) ms = insert_records(directory, count);
    else {
        fprintf(stderr, "securestore-bench-c: unknown workload %s\n", workload);
        return 64;
    }
    printf("ms %.4f\n", ms);
    return 0;
}
