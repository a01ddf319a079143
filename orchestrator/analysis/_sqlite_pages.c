/* The integer columns of one rowid range of an SQLite table, read from the file's pages (the
 * table b-tree, https://sqlite.org/fileformat2.html) straight into caller-owned arrays. Loaded
 * with ctypes by sqlite_pages.py; no Python API and no SQLite library here.
 *
 * Why not SQLite's API: stepping a statement and taking each value through sqlite3_column_*
 * costs about 250 ns a row of an nsys kernel table; most of it is the virtual machine, not the
 * file. A table b-tree is simple to walk: interior pages hold (child page, largest rowid below)
 * pairs, leaf pages hold (rowid, record) cells, a record is a header of varint "serial types"
 * and the values after it. This reads only what it can read exactly and answers GIVE_UP for the
 * rest (the caller then reads the range with SQLite, whose rules apply unchanged):
 * - a file whose header is not SQLite 3's, or that is in WAL mode (committed rows may be in the
 *   -wal file), a page type other than a table b-tree's, a cell whose payload spills to overflow
 *   pages, a record with fewer columns than a read one needs (a column added later: its default
 *   would apply), rowids not in ascending order, a tree deeper than SQLite builds, a page visited
 *   twice: all GIVE_UP; every read is bounds-checked against the page, so a corrupt or hostile
 *   file can only make it give up;
 * - with times (`tstart`, `tend` >= 0): a row is kept when both are integers and end >= start
 *   (what the Python reader keeps), else counted as seen and left out;
 * - in a kept row, an integer is stored as it is, a NULL as -1 (`coalesce(c, -1)`); a real, text
 *   or blob: GIVE_UP (SQLite's CAST rules then apply);
 * - the subset: rows whose condition column holds one of `cond_vals` (a NULL: not among them;
 *   anything else: GIVE_UP), with some of their columns (a NULL as that column's default: the
 *   Python reader's `coalesce`; column -1: the rowid).
 * Columns are stored at their array's width (1, 2, 4 or 8 bytes), as a numpy assignment casts.
 */
#define _FILE_OFFSET_BITS 64
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GIVE_UP (-1)
#define NO_ROOM (-2)
#define MAX_DEPTH 20 /* SQLite's own limit for a b-tree (BTCURSOR_MAX_DEPTH) */
#define MAX_COLS 64  /* the most record columns a read needs */
#define BLOCK_PAGES 256

typedef struct {
    int fd;
    uint32_t page_size, usable;
    uint64_t npages;
    uint8_t *block; /* pages [block_first, block_first + block_n) of the file */
    uint64_t block_first, block_n;
    uint8_t *seen;  /* a bit per page: visited */
} file_t;

/* the page's bytes (page 1 starts with the 100-byte file header), or NULL */
static const uint8_t *page(file_t *f, uint64_t pgno) {
    if (pgno < 1 || pgno > f->npages) return NULL;
    if (pgno < f->block_first || pgno >= f->block_first + f->block_n) {
        uint64_t n = f->npages - pgno + 1;
        if (n > BLOCK_PAGES) n = BLOCK_PAGES;
        size_t want = (size_t)n * f->page_size;
        ssize_t got = pread(f->fd, f->block, want, (off_t)(pgno - 1) * f->page_size);
        if (got < (ssize_t)f->page_size) return NULL;
        f->block_first = pgno;
        f->block_n = (uint64_t)got / f->page_size;
    }
    return f->block + (size_t)(pgno - f->block_first) * f->page_size;
}

/* a varint at p (< end): its value in *v, its length (0: it runs past end) */
static int varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) {
        if (p + i >= end) return 0;
        x = (x << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    if (p + 8 >= end) return 0;
    *v = (x << 8) | p[8];
    return 9;
}

static uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* value kinds of a serial type */
#define V_NULL 0
#define V_INT 1
#define V_OTHER 2

/* the length in bytes of a value of serial type t, and its kind */
static uint64_t serial_len(uint64_t t, int *kind) {
    static const uint8_t ilen[] = {0, 1, 2, 3, 4, 6, 8};
    if (t == 0) { *kind = V_NULL; return 0; }
    if (t <= 6) { *kind = V_INT; return ilen[t]; }
    if (t == 7) { *kind = V_OTHER; return 8; }
    if (t == 8 || t == 9) { *kind = V_INT; return 0; }
    *kind = V_OTHER;
    if (t < 12) return UINT64_MAX; /* reserved: not in a well-formed file */
    return (t - 12) / 2;
}

static int64_t int_value(uint64_t t, const uint8_t *p) {
    if (t == 8) return 0;
    if (t == 9) return 1;
    static const uint8_t ilen[] = {0, 1, 2, 3, 4, 6, 8};
    int n = ilen[t];
    uint64_t x = (p[0] & 0x80) ? UINT64_MAX : 0; /* sign-extend */
    for (int i = 0; i < n; i++) x = (x << 8) | p[i];
    return (int64_t)x;
}

static void store(void *dest, int width, int64_t i, int64_t v) {
    switch (width) {
    case 1: ((int8_t *)dest)[i] = (int8_t)v; break;
    case 2: ((int16_t *)dest)[i] = (int16_t)v; break;
    case 4: ((int32_t *)dest)[i] = (int32_t)v; break;
    default: ((int64_t *)dest)[i] = v; break;
    }
}

typedef struct {
    /* what to read */
    int64_t lo, hi;
    int32_t ndest;
    const int32_t *src; /* record column of each dest; -1: the rowid */
    const int32_t *widths;
    void **dests;
    int64_t cap;
    int32_t tstart, tend;
    int32_t cond_col, ncond;
    const int64_t *cond_vals;
    int32_t nsub;
    const int32_t *sub_src;
    const int64_t *sub_null;
    int64_t **subs;
    int32_t need; /* record columns needed: 1 + the largest index read */
    /* what was read */
    int64_t kept, seen, last_rowid;
    int64_t *subn;
} job_t;

/* one leaf cell: 0 done with it, GIVE_UP or NO_ROOM */
static int64_t cell(job_t *j, file_t *f, const uint8_t *pg, const uint8_t *c) {
    const uint8_t *end = pg + f->usable;
    uint64_t plen, rowid_u;
    int k = varint(c, end, &plen);
    if (!k) return GIVE_UP;
    c += k;
    k = varint(c, end, &rowid_u);
    if (!k) return GIVE_UP;
    c += k;
    int64_t rowid = (int64_t)rowid_u;
    if (rowid <= j->last_rowid) return GIVE_UP; /* not ascending: corrupt */
    j->last_rowid = rowid;
    if (rowid < j->lo || rowid > j->hi) return 0;
    j->seen++;
    /* a payload over usable - 35 bytes spills to overflow pages */
    if (plen > f->usable - 35 || plen > (uint64_t)(end - c)) return GIVE_UP;
    const uint8_t *rec = c, *rec_end = c + plen;
    uint64_t hlen;
    k = varint(rec, rec_end, &hlen);
    if (!k || hlen > plen || hlen < (uint64_t)k) return GIVE_UP;
    const uint8_t *h = rec + k, *h_end = rec + hlen, *body = rec + hlen;
    uint64_t types[MAX_COLS];
    const uint8_t *at[MAX_COLS];
    int kinds[MAX_COLS];
    for (int32_t i = 0; i < j->need; i++) {
        if (h >= h_end) return GIVE_UP; /* fewer columns in the record: a default applies */
        k = varint(h, h_end, &types[i]);
        if (!k) return GIVE_UP;
        h += k;
        uint64_t n = serial_len(types[i], &kinds[i]);
        if (n > (uint64_t)(rec_end - body)) return GIVE_UP;
        at[i] = body;
        body += n;
    }
#define VALUE(col, out, kind)                                                                  \
    do {                                                                                       \
        if ((col) < 0) { (kind) = V_INT; (out) = rowid; }                                      \
        else {                                                                                 \
            (kind) = kinds[col];                                                               \
            (out) = (kind) == V_INT ? int_value(types[col], at[col]) : 0;                      \
        }                                                                                      \
    } while (0)
    int kind;
    int64_t v, s = 0, e = 0;
    if (j->tstart >= 0) {
        int ks, ke;
        VALUE(j->tstart, s, ks);
        VALUE(j->tend, e, ke);
        if (ks != V_INT || ke != V_INT || e < s) return 0;
    }
    if (j->kept >= j->cap) return NO_ROOM;
    for (int32_t d = 0; d < j->ndest; d++) {
        VALUE(j->src[d], v, kind);
        if (kind == V_OTHER) return GIVE_UP;
        store(j->dests[d], j->widths[d], j->kept, kind == V_NULL ? -1 : v);
    }
    if (j->nsub) {
        VALUE(j->cond_col, v, kind);
        if (kind == V_OTHER) return GIVE_UP;
        int hit = 0;
        for (int32_t i = 0; kind == V_INT && i < j->ncond && !hit; i++) hit = v == j->cond_vals[i];
        for (int32_t i = 0; hit && i < j->nsub; i++) {
            int64_t x;
            VALUE(j->sub_src[i], x, kind);
            if (kind == V_OTHER) return GIVE_UP;
            j->subs[i][j->subn[i]++] = kind == V_NULL ? j->sub_null[i] : x;
        }
    }
#undef VALUE
    j->kept++;
    return 0;
}

/* the rows of the tree under `pgno` within [lo, hi] */
static int64_t walk(job_t *j, file_t *f, uint64_t pgno, int depth) {
    if (depth >= MAX_DEPTH) return GIVE_UP;
    if (pgno < 1 || pgno > f->npages || (f->seen[(pgno - 1) >> 3] & (1 << ((pgno - 1) & 7)))) {
        return GIVE_UP; /* out of the file, or a cycle */
    }
    f->seen[(pgno - 1) >> 3] |= (uint8_t)(1 << ((pgno - 1) & 7));
    const uint8_t *pg = page(f, pgno);
    if (!pg) return GIVE_UP;
    uint32_t hdr = pgno == 1 ? 100 : 0;
    if (hdr + 12 > f->usable) return GIVE_UP;
    const uint8_t *h = pg + hdr;
    uint32_t ncells = be16(h + 3);
    if (h[0] == 13) { /* leaf */
        if (hdr + 8 + 2 * (uint64_t)ncells > f->usable) return GIVE_UP;
        for (uint32_t i = 0; i < ncells; i++) {
            uint32_t off = be16(h + 8 + 2 * i);
            if (off < hdr + 8 + 2 * ncells || off >= f->usable) return GIVE_UP;
            int64_t r = cell(j, f, pg, pg + off);
            if (r < 0) return r;
            if (j->last_rowid >= j->hi) break;
        }
        return 0;
    }
    if (h[0] != 5) return GIVE_UP; /* not a table b-tree page (an index, WITHOUT ROWID) */
    if (hdr + 12 + 2 * (uint64_t)ncells > f->usable) return GIVE_UP;
    /* the page may leave the block while its children are read: a copy of its own */
    uint8_t *copy = malloc(f->page_size);
    if (!copy) return GIVE_UP;
    memcpy(copy, pg, f->page_size);
    h = copy + hdr;
    int64_t r = 0;
    for (uint32_t i = 0; i <= ncells && r == 0; i++) {
        uint64_t child, key = UINT64_MAX;
        if (i < ncells) {
            uint32_t off = be16(h + 12 + 2 * i);
            if (off < hdr + 12 + 2 * ncells || off + 4 >= f->usable) { r = GIVE_UP; break; }
            child = be32(copy + off);
            if (!varint(copy + off + 4, copy + f->usable, &key)) { r = GIVE_UP; break; }
            if ((int64_t)key < j->lo) continue; /* every rowid below is under lo */
        } else {
            child = be32(h + 8); /* the right-most child */
        }
        r = walk(j, f, child, depth + 1);
        if ((int64_t)key >= j->hi) break; /* every rowid further on is over hi */
    }
    free(copy);
    return r;
}

/* The rows with lo <= rowid <= hi of the table whose b-tree root is page `root` of the file at
 * `path` (see the top of this file): dest d of capacity `cap` rows from record column src[d]
 * (-1: the rowid); the subset's nsub columns into subs (each of capacity `cap`, their counts in
 * subn). Returns the rows kept, or GIVE_UP / NO_ROOM; *seen is the rows the range held. */
int64_t sqlite_pages_fetch(const char *path, int64_t root, int64_t lo, int64_t hi,
                           int32_t ndest, const int32_t *src, const int32_t *widths, void **dests,
                           int64_t cap, int32_t tstart, int32_t tend, int32_t cond_col,
                           const int64_t *cond_vals, int32_t ncond, int32_t nsub,
                           const int32_t *sub_src, const int64_t *sub_null, int64_t **subs,
                           int64_t *subn, int64_t *seen) {
    job_t j = {lo, hi, ndest, src, widths, dests, cap, tstart, tend, cond_col, ncond, cond_vals,
               nsub, sub_src, sub_null, subs, 0, 0, 0, INT64_MIN, subn};
    *seen = 0;
    for (int32_t i = 0; i < nsub; i++) subn[i] = 0;
    int32_t cols[3 + 2 * MAX_COLS], nc = 0;
    cols[nc++] = tstart;
    cols[nc++] = tend;
    cols[nc++] = nsub ? cond_col : -1;
    if (ndest > MAX_COLS || nsub > MAX_COLS) return GIVE_UP;
    for (int32_t d = 0; d < ndest; d++) cols[nc++] = src[d];
    for (int32_t i = 0; i < nsub; i++) cols[nc++] = sub_src[i];
    for (int32_t i = 0; i < nc; i++) {
        if (cols[i] >= MAX_COLS) return GIVE_UP;
        if (cols[i] + 1 > j.need) j.need = cols[i] + 1;
    }
    if ((tstart < 0) != (tend < 0)) return GIVE_UP;

    file_t f = {-1, 0, 0, 0, NULL, 0, 0, NULL};
    int64_t r = GIVE_UP;
    uint8_t head[100];
    f.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f.fd < 0 || pread(f.fd, head, 100, 0) != 100) goto done;
    if (memcmp(head, "SQLite format 3", 16) != 0) goto done;
    if (head[18] != 1 || head[19] != 1) goto done; /* WAL: rows may be in the -wal file */
    f.page_size = be16(head + 16) == 1 ? 65536 : be16(head + 16);
    if (f.page_size < 512 || (f.page_size & (f.page_size - 1))) goto done;
    if (head[20] > f.page_size - 480) goto done;
    f.usable = f.page_size - head[20];
    off_t size = lseek(f.fd, 0, SEEK_END);
    if (size <= 0) goto done;
    f.npages = (uint64_t)size / f.page_size;
    f.block = malloc((size_t)BLOCK_PAGES * f.page_size);
    f.seen = calloc(f.npages / 8 + 1, 1);
    if (!f.block || !f.seen) goto done;
    r = walk(&j, &f, (uint64_t)root, 0);
    if (r == 0) r = j.kept;
done:
    if (f.fd >= 0) close(f.fd);
    free(f.block);
    free(f.seen);
    *seen = j.seen;
    return r;
}
