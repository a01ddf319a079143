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
 *   twice, an interior key out of order or outside its parent's bounds, a row outside the bounds
 *   its parents' keys give it: all GIVE_UP; every read is bounds-checked against the page, so a
 *   corrupt or hostile file can only make it give up;
 * - `sqlite_pages_shape` walks the whole tree by its child pointers with the same checks and
 *   counts its rows: the number of rows the reader must find, and where every `step`-th row is
 *   (parts of equal rows whatever the rowids: memory follows rows, never the rowid range);
 * - with times (`tstart`, `tend` >= 0): a row is kept when both are integers strictly inside
 *   +-TIME_LIMIT_NS and end >= start (what the Python reader keeps: `sql_integers.a_time`), else
 *   counted as seen and left out; a real with an integral
 *   value in int64's range counts as that integer (SQLite's `CAST(x AS INTEGER) = x`: a column
 *   declared REAL holds its integers so, and the SQLite path keeps such rows too);
 * - in a kept row, an integer is stored as it is, a NULL as -1 (`coalesce(c, -1)`); a real, text
 *   or blob: GIVE_UP (SQLite's CAST rules then apply);
 * - the subset: rows whose condition column holds one of `cond_vals` (a NULL: not among them;
 *   anything else: GIVE_UP), with some of their columns (a NULL as that column's default: the
 *   Python reader's `coalesce`; column -1: the rowid);
 * - the text column (`text_col` >= 0): the kept rows' values of one TEXT column as SQLite's
 *   `group_concat(CASE WHEN c IS NULL THEN '' ELSE char(2) || c END, char(31))` writes them: a
 *   value is byte 2 then its bytes, a NULL nothing, rows joined by byte 31; a value of another
 *   type, or a file whose text is not UTF-8: GIVE_UP (SQLite's rules then apply);
 * - or, asked for codes (`codes` not NULL), that column's distinct values instead of its rows:
 *   each kept row's code (its value's number among the distinct values in order of first
 *   appearance; -1 a NULL) in codes[], each distinct value's bytes once in tbuf (value k ends
 *   at name_end[k]). With cut patterns (`cuts`: byte strings, each ended by a 0 byte), a value
 *   is cut at the first place where any of them starts (name_cut[k] = 1: it was cut): the
 *   values are interned after the cut (a million PyTorch operator names, `aten::mul, op_id =
 *   322567`, are a few dozen operators), so Python touches each distinct value once, not each
 *   row (nsys_nvtx.py).
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
    int utf8; /* the file's text encoding is UTF-8 (header byte 56..59 = 1) */
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

/* sql_integers.TIME_LIMIT_NS: a time is inside +-2^62 ns, so that one minus another fits */
#define TIME_LIMIT_NS ((int64_t)1 << 62)

/* a float (serial type 7) that is an integer in int64's range: 1 and its value in *v */
static int integral_real(const uint8_t *p, int64_t *v) {
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits = (bits << 8) | p[i];
    double d;
    memcpy(&d, &bits, sizeof d);
    /* NaN fails every comparison; -2^63 is in range, 2^63 is not */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return 0;
    int64_t i = (int64_t)d;
    if ((double)i != d) return 0;
    *v = i;
    return 1;
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
    int32_t text_col;
    uint8_t *tbuf;
    int64_t tcap, tlen;
    /* codes instead of the joined text (see the top): the cut patterns, the outputs, and the
     * hash table of the distinct values so far (a slot holds the value's 32-bit hash above its
     * number + 1, 0 is empty: a probe compares bytes only where the hashes agree, and the table
     * grows without hashing a value again) */
    const uint8_t *cuts;
    int64_t cuts_len;
    int32_t *codes;
    int64_t *name_end;
    uint8_t *name_cut;
    int64_t nnames;
    uint64_t *slots;
    uint64_t nslots;
    uint8_t cut_first[256]; /* the first bytes of the cut patterns */
    int32_t need; /* record columns needed: 1 + the largest index read */
    /* what was read */
    int64_t kept, seen, last_rowid;
    int64_t *subn;
    int any; /* a row was met (last_rowid holds it) */
    /* the shape pass (`marks` not NULL): the rows counted, and the rowid of every `step`-th */
    int64_t step, nmarks, marks_cap;
    int64_t *marks;
} job_t;

/* The rowids a subtree may hold, from its parents' keys: lo < rowid <= hi (SQLite's own rule:
 * an interior cell's key is >= every rowid of its child and < every rowid of the next). */
typedef struct {
    int has_lo, has_hi;
    int64_t lo, hi;
} bounds_t;

static int within(const bounds_t *b, int64_t v) {
    return (!b->has_lo || v > b->lo) && (!b->has_hi || v <= b->hi);
}

/* where `v` (n bytes) is cut: the first place a cut pattern starts, else n */
static int64_t cut_at(const job_t *j, const uint8_t *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!j->cut_first[v[i]]) continue;
        for (const uint8_t *p = j->cuts; p < j->cuts + j->cuts_len;) {
            int64_t len = (int64_t)strlen((const char *)p);
            if (len <= n - i && memcmp(v + i, p, (size_t)len) == 0) return i;
            p += len + 1;
        }
    }
    return n;
}

static uint32_t hash_bytes(const uint8_t *p, int64_t n, int cut) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)cut; /* FNV-1a */
    for (int64_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return (uint32_t)(h ^ (h >> 32));
}

/* the code of value `v` (n bytes) after its cut, a new one for a value not met yet; or NO_ROOM
 * (tbuf too small) or GIVE_UP (out of memory) */
static int64_t intern(job_t *j, const uint8_t *v, int64_t n) {
    int64_t len = j->cuts_len ? cut_at(j, v, n) : n;
    int cut = len < n;
    if ((uint64_t)j->nnames * 2 >= j->nslots) { /* grow: at most half full */
        if (j->nslots >= ((uint64_t)1 << 32)) return GIVE_UP; /* the hash's bits: a guard */
        /* first sized for every row distinct, up to 4 M slots (32 MB, its pages touched only
         * where values land): a capture whose names are all distinct is never rehashed */
        uint64_t ns = j->nslots * 2;
        if (!j->nslots)
            for (ns = 1024; ns < (uint64_t)j->cap * 2 && ns < ((uint64_t)1 << 22);) ns *= 2;
        uint64_t *s = calloc(ns, sizeof *s);
        if (!s) return GIVE_UP;
        for (uint64_t i = 0; i < j->nslots; i++) {
            if (!j->slots[i]) continue;
            uint64_t h = (j->slots[i] >> 32) & (ns - 1);
            while (s[h]) h = (h + 1) & (ns - 1);
            s[h] = j->slots[i];
        }
        free(j->slots);
        j->slots = s;
        j->nslots = ns;
    }
    uint32_t hv = hash_bytes(v, len, cut);
    uint64_t h = hv & (j->nslots - 1);
    for (; j->slots[h]; h = (h + 1) & (j->nslots - 1)) {
        if ((uint32_t)(j->slots[h] >> 32) != hv) continue;
        int64_t k = (int64_t)(j->slots[h] & 0xffffffffULL) - 1, b = k ? j->name_end[k - 1] : 0;
        if (j->name_cut[k] == cut && j->name_end[k] - b == len &&
            memcmp(j->tbuf + b, v, (size_t)len) == 0)
            return k;
    }
    if (j->nnames >= j->cap || j->nnames >= INT32_MAX - 1) return GIVE_UP; /* cannot: a guard */
    if (j->tlen + len > j->tcap) return NO_ROOM;
    memcpy(j->tbuf + j->tlen, v, (size_t)len);
    j->tlen += len;
    j->name_end[j->nnames] = j->tlen;
    j->name_cut[j->nnames] = (uint8_t)cut;
    j->slots[h] = ((uint64_t)hv << 32) | (uint64_t)(j->nnames + 1);
    return j->nnames++;
}

/* one leaf cell: 0 done with it, GIVE_UP or NO_ROOM */
static int64_t cell(job_t *j, file_t *f, const uint8_t *pg, const uint8_t *c, const bounds_t *b) {
    const uint8_t *end = pg + f->usable;
    uint64_t plen, rowid_u;
    int k = varint(c, end, &plen);
    if (!k) return GIVE_UP;
    c += k;
    k = varint(c, end, &rowid_u);
    if (!k) return GIVE_UP;
    c += k;
    int64_t rowid = (int64_t)rowid_u;
    if (j->any && rowid <= j->last_rowid) return GIVE_UP; /* not ascending: corrupt */
    if (!within(b, rowid)) return GIVE_UP; /* not where its parents' keys put it: corrupt */
    j->any = 1;
    j->last_rowid = rowid;
    if (j->marks) { /* the shape pass: counted, every step-th row's rowid kept */
        if (j->seen % j->step == 0) {
            if (j->nmarks >= j->marks_cap) return NO_ROOM;
            j->marks[j->nmarks++] = rowid;
        }
        j->seen++;
        return 0;
    }
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
        if (ks == V_OTHER && types[j->tstart] == 7 && integral_real(at[j->tstart], &s)) ks = V_INT;
        if (ke == V_OTHER && types[j->tend] == 7 && integral_real(at[j->tend], &e)) ke = V_INT;
        if (ks != V_INT || ke != V_INT || e < s) return 0;
        if (s <= -TIME_LIMIT_NS || e >= TIME_LIMIT_NS) return 0; /* no clock's time */
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
    if (j->text_col >= 0) {
        uint64_t t = types[j->text_col];
        uint64_t n = kinds[j->text_col] == V_NULL ? 0 : (t - 13) / 2;
        if (kinds[j->text_col] != V_NULL && (t < 13 || !(t & 1) || !f->utf8)) return GIVE_UP;
        if (j->codes) {
            int64_t code = -1;
            if (kinds[j->text_col] != V_NULL) {
                code = intern(j, at[j->text_col], (int64_t)n);
                if (code < 0) return code;
            }
            j->codes[j->kept++] = (int32_t)code;
            return 0;
        }
        int64_t need = (j->kept ? 1 : 0) + (kinds[j->text_col] == V_NULL ? 0 : 1 + (int64_t)n);
        if (j->tlen + need > j->tcap) return NO_ROOM;
        if (j->kept) j->tbuf[j->tlen++] = 31;
        if (kinds[j->text_col] != V_NULL) {
            j->tbuf[j->tlen++] = 2;
            memcpy(j->tbuf + j->tlen, at[j->text_col], n);
            j->tlen += (int64_t)n;
        }
    }
    j->kept++;
    return 0;
}

/* the rows of the tree under `pgno` within [lo, hi]; `b`: the rowids its parents' keys allow */
static int64_t walk(job_t *j, file_t *f, uint64_t pgno, int depth, const bounds_t *b) {
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
            int64_t r = cell(j, f, pg, pg + off, b);
            if (r < 0) return r;
            if (j->last_rowid >= j->hi) break;
        }
        return 0;
    }
    if (h[0] != 5) return GIVE_UP; /* not a table b-tree page (an index, WITHOUT ROWID) */
    if (ncells == 0 || hdr + 12 + 2 * (uint64_t)ncells > f->usable) return GIVE_UP;
    /* the children and keys first, every key checked (ascending, within the page's own bounds)
     * before any child is skipped for its key: a page may leave the block while its children
     * are read, so they are copied */
    uint64_t *child = malloc(sizeof(uint64_t) * (ncells + 1));
    int64_t *key = malloc(sizeof(int64_t) * ncells);
    int64_t r = 0;
    if (!child || !key) r = GIVE_UP;
    for (uint32_t i = 0; i < ncells && r == 0; i++) {
        uint32_t off = be16(h + 12 + 2 * i);
        uint64_t k;
        if (off < hdr + 12 + 2 * ncells || off + 4 >= f->usable ||
            !varint(pg + off + 4, pg + f->usable, &k)) {
            r = GIVE_UP;
            break;
        }
        child[i] = be32(pg + off);
        key[i] = (int64_t)k;
        if (!within(b, key[i]) || (i > 0 && key[i] <= key[i - 1])) r = GIVE_UP;
    }
    if (r == 0) child[ncells] = be32(h + 8); /* the right-most child */
    for (uint32_t i = 0; i <= ncells && r == 0; i++) {
        /* child i holds key[i-1] < rowid <= key[i] (the right-most: <= the page's own bound) */
        bounds_t cb = *b;
        if (i > 0) cb.has_lo = 1, cb.lo = key[i - 1];
        if (i < ncells) {
            cb.has_hi = 1, cb.hi = key[i];
            if (key[i] < j->lo) continue; /* every rowid below is under lo */
        }
        r = walk(j, f, child[i], depth + 1, &cb);
        if (i < ncells && key[i] >= j->hi) break; /* every rowid further on is over hi */
    }
    free(child);
    free(key);
    return r;
}

/* the file's header read and checked, its block and page bitmap allocated: 0, else GIVE_UP (the
 * file is closed again by close_file either way) */
static int open_file(file_t *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    uint8_t head[100];
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0 || pread(f->fd, head, 100, 0) != 100) return GIVE_UP;
    if (memcmp(head, "SQLite format 3", 16) != 0) return GIVE_UP;
    if (head[18] != 1 || head[19] != 1) return GIVE_UP; /* WAL: rows may be in the -wal file */
    f->utf8 = be32(head + 56) == 1;
    f->page_size = be16(head + 16) == 1 ? 65536 : be16(head + 16);
    if (f->page_size < 512 || (f->page_size & (f->page_size - 1))) return GIVE_UP;
    if (head[20] > f->page_size - 480) return GIVE_UP;
    f->usable = f->page_size - head[20];
    off_t size = lseek(f->fd, 0, SEEK_END);
    if (size <= 0) return GIVE_UP;
    f->npages = (uint64_t)size / f->page_size;
    f->block = malloc((size_t)BLOCK_PAGES * f->page_size);
    f->seen = calloc(f->npages / 8 + 1, 1);
    if (!f->block || !f->seen) return GIVE_UP;
    return 0;
}

static void close_file(file_t *f) {
    if (f->fd >= 0) close(f->fd);
    free(f->block);
    free(f->seen);
}

/* The version of this file's calling conventions: sqlite_pages.py loads a build only when it
 * answers the one it declares (a build older than a change of arguments is left unused). */
int32_t sqlite_pages_abi(void) { return 3; }

/* The rows with lo <= rowid <= hi of the table whose b-tree root is page `root` of the file at
 * `path` (see the top of this file): dest d of capacity `cap` rows from record column src[d]
 * (-1: the rowid); the subset's nsub columns into subs (each of capacity `cap`, their counts in
 * subn); with text_col >= 0, that column's values into tbuf (capacity tcap bytes, *tlen
 * written); with `codes`, the column's codes and distinct values instead (see the top: cut
 * patterns `cuts` of cuts_len bytes, name_end and name_cut of `cap` entries, *nnames values).
 * Returns the rows kept, or GIVE_UP / NO_ROOM; *seen is the rows the range held. */
int64_t sqlite_pages_fetch(const char *path, int64_t root, int64_t lo, int64_t hi,
                           int32_t ndest, const int32_t *src, const int32_t *widths, void **dests,
                           int64_t cap, int32_t tstart, int32_t tend, int32_t cond_col,
                           const int64_t *cond_vals, int32_t ncond, int32_t nsub,
                           const int32_t *sub_src, const int64_t *sub_null, int64_t **subs,
                           int64_t *subn, int32_t text_col, uint8_t *tbuf, int64_t tcap,
                           int64_t *tlen, const uint8_t *cuts, int64_t cuts_len, int32_t *codes,
                           int64_t *name_end, uint8_t *name_cut, int64_t *nnames,
                           int64_t *seen) {
    job_t j;
    memset(&j, 0, sizeof j);
    j.lo = lo, j.hi = hi, j.ndest = ndest, j.src = src, j.widths = widths, j.dests = dests;
    j.cap = cap, j.tstart = tstart, j.tend = tend;
    j.cond_col = cond_col, j.ncond = ncond, j.cond_vals = cond_vals;
    j.nsub = nsub, j.sub_src = sub_src, j.sub_null = sub_null, j.subs = subs, j.subn = subn;
    j.text_col = text_col, j.tbuf = tbuf, j.tcap = tcap;
    j.last_rowid = INT64_MIN;
    *seen = 0;
    *tlen = 0;
    *nnames = 0;
    if (codes) {
        if (text_col < 0 || !name_end || !name_cut || (cuts_len && (!cuts || cuts[cuts_len - 1])))
            return GIVE_UP;
        j.codes = codes, j.name_end = name_end, j.name_cut = name_cut;
        j.cuts = cuts, j.cuts_len = cuts_len;
        for (const uint8_t *p = cuts; p && p < cuts + cuts_len; p += strlen((const char *)p) + 1) {
            if (!*p) return GIVE_UP; /* an empty pattern would cut every value at 0 */
            j.cut_first[*p] = 1;
        }
    }
    for (int32_t i = 0; i < nsub; i++) subn[i] = 0;
    int32_t cols[3 + 2 * MAX_COLS], nc = 0;
    cols[nc++] = tstart;
    cols[nc++] = tend;
    cols[nc++] = nsub ? cond_col : -1;
    if (ndest > MAX_COLS || nsub > MAX_COLS) return GIVE_UP;
    if (text_col >= MAX_COLS || (text_col >= 0 && !tbuf)) return GIVE_UP;
    if (text_col + 1 > j.need) j.need = text_col + 1;
    for (int32_t d = 0; d < ndest; d++) cols[nc++] = src[d];
    for (int32_t i = 0; i < nsub; i++) cols[nc++] = sub_src[i];
    for (int32_t i = 0; i < nc; i++) {
        if (cols[i] >= MAX_COLS) return GIVE_UP;
        if (cols[i] + 1 > j.need) j.need = cols[i] + 1;
    }
    if ((tstart < 0) != (tend < 0)) return GIVE_UP;

    file_t f;
    int64_t r = GIVE_UP;
    bounds_t all = {0, 0, 0, 0};
    if (open_file(&f, path) == 0) r = walk(&j, &f, (uint64_t)root, 0, &all);
    if (r == 0) r = j.kept;
    close_file(&f);
    free(j.slots);
    *seen = j.seen;
    *tlen = j.tlen;
    *nnames = j.nnames;
    return r;
}

/* The shape of the table whose b-tree root is page `root`: its whole tree walked by the child
 * pointers, every page checked as the fetch checks it (keys ascending and within their parent's
 * bounds, rows within their leaf's bounds and ascending, no page twice); *rows its rows, *last
 * the last one's rowid, and marks[k] the rowid of row k * step (k < *nmarks <= marks_cap). GIVE_UP where a check fails,
 * NO_ROOM where marks_cap is too small; else 0. */
int64_t sqlite_pages_shape(const char *path, int64_t root, int64_t step, int64_t *marks,
                           int64_t marks_cap, int64_t *nmarks, int64_t *rows, int64_t *last) {
    job_t j;
    memset(&j, 0, sizeof j);
    j.text_col = -1;
    j.lo = INT64_MIN;
    j.hi = INT64_MAX;
    j.last_rowid = INT64_MIN;
    j.step = step;
    j.marks = marks;
    j.marks_cap = marks_cap;
    *nmarks = *rows = 0;
    *last = INT64_MIN;
    if (step < 1 || marks_cap < 1) return GIVE_UP;
    file_t f;
    int64_t r = GIVE_UP;
    bounds_t all = {0, 0, 0, 0};
    if (open_file(&f, path) == 0) r = walk(&j, &f, (uint64_t)root, 0, &all);
    close_file(&f);
    *nmarks = j.nmarks;
    *rows = j.seen;
    *last = j.last_rowid;
    return r;
}
