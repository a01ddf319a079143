/* One pass over a batch of complete events in the text layout libkineto writes, the columns the
 * Kineto reader needs straight into caller-owned arrays (see kineto_scan.py, which loads this
 * with ctypes; no Python API here, so no Python headers are needed to build it).
 *
 * libkineto writes every complete event the same way:
 *
 *   {
 *     "ph": "X", "cat": "kernel", "name": "...", "pid": 0, "tid": 7,
 *     "ts": 4517054407644.900, "dur": 317.123,
 *     "args": {
 *       "External id": 2053,  "device": 0, "context": 1,  "stream": 7, "correlation": 25109
 *     }
 *   }
 *
 * The scan checks every literal between the fields and gives the batch up (returns -1, and the
 * caller falls back to the numpy scan or to orjson) at the first thing that differs: another key
 * order, a name with an escape or a control character, a number in another notation or too long
 * for 64 bits, an argument value it cannot skip on its line. It reads only inside [buf, buf+len):
 * every read is preceded by a length check, so hostile text can only make it give up.
 */
#define _GNU_SOURCE /* memmem */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GIVE_UP (-1)
#define NO_ROOM (-2)

/* which of the read arguments an event carried (the `found` column) */
#define HAS_STREAM 1
#define HAS_CORR 2
#define HAS_DEVICE 4
#define HAS_BYTES 8

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

static int lit(cursor *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return 0;
    c->p += n;
    return 1;
}
#define LIT(c, s) lit((c), (s), sizeof(s) - 1)

static int is_digit(uint8_t ch) { return ch >= '0' && ch <= '9'; }

/* 1 to `most` decimal digits at the cursor as their value; 0 when there are none or more */
static int digits(cursor *c, int most, int64_t *out) {
    const uint8_t *p = c->p;
    int nd = 0;
    int64_t v = 0;
    while (p < c->end && is_digit(*p)) {
        if (++nd > most)
            return 0;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (nd == 0)
        return 0;
    *out = v;
    c->p = p;
    return nd;
}

/* -?[0-9]{1,18}: an integer that fits in int64 */
static int integer(cursor *c, int64_t *out) {
    cursor d = *c;
    int neg = LIT(&d, "-");
    int64_t v;
    if (!digits(&d, 18, &v))
        return 0;
    *out = neg ? -v : v;
    c->p = d.p;
    return 1;
}

/* microseconds with at most three decimals (-?[0-9]+(\.[0-9]{1,3})?) as integer nanoseconds,
 * exactly: no float in between */
static int micros_as_ns(cursor *c, int64_t *out) {
    int64_t whole, frac = 0;
    int neg = c->p < c->end && *c->p == '-';
    if (!integer(c, &whole))
        return 0;
    if (whole > INT64_MAX / 1000 || whole < -(INT64_MAX / 1000))
        return 0;
    cursor d = *c;
    if (LIT(&d, ".")) {
        int nd = digits(&d, 3, &frac);
        if (nd == 0)
            return 0;
        for (int k = nd; k < 3; k++)
            frac *= 10;
        c->p = d.p;
    }
    /* "-0.5": the sign belongs to the fraction too */
    *out = whole * 1000 + (neg ? -frac : frac);
    return 1;
}

/* a string's body up to its closing quote (not consumed): no escape, no control character, so
 * the bytes are the text */
static int plain_string(cursor *c, const uint8_t **lo, int64_t *n, uint64_t *hash) {
    const uint8_t *p = c->p;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    while (p < c->end && *p != '"') {
        if (*p == '\\' || *p < 0x20)
            return 0;
        h = (h ^ *p) * 1099511628211ULL;
        p++;
    }
    if (p >= c->end)
        return 0;
    *lo = c->p;
    *n = p - c->p;
    *hash = h;
    c->p = p;
    return 1;
}

/* skip any JSON string (escapes allowed) starting at its opening quote, on one line */
static int skip_string(cursor *c) {
    const uint8_t *p = c->p + 1;
    while (p < c->end) {
        if (*p == '"') {
            c->p = p + 1;
            return 1;
        }
        if (*p < 0x20)
            return 0;
        if (*p == '\\') { /* the escaped byte too, if there is one */
            if (c->end - p < 2)
                return 0;
            p++;
        }
        p++;
    }
    return 0;
}

/* skip an argument's value that is not read: a string, a number, true/false/null, or an array
 * or object (nesting counted, strings inside skipped), all on the argument line */
static int skip_value(cursor *c) {
    if (c->p >= c->end)
        return 0;
    uint8_t ch = *c->p;
    if (ch == '"')
        return skip_string(c);
    if (ch == '[' || ch == '{') {
        int depth = 0;
        while (c->p < c->end) {
            ch = *c->p;
            if (ch == '"') {
                if (!skip_string(c))
                    return 0;
                continue;
            }
            if (ch == '\n')
                return 0;
            if (ch == '[' || ch == '{')
                depth++;
            else if (ch == ']' || ch == '}') {
                if (--depth == 0) {
                    c->p++;
                    return 1;
                }
            }
            c->p++;
        }
        return 0;
    }
    /* a number or a literal: up to the separator */
    const uint8_t *start = c->p;
    while (c->p < c->end && *c->p != ',' && *c->p != '\n' && *c->p != ' ')
        c->p++;
    return c->p > start;
}

/* the key names compared as lengths + bytes */
static int key_is(const uint8_t *k, int64_t n, const char *s) {
    size_t m = strlen(s);
    return (size_t)n == m && memcmp(k, s, m) == 0;
}

/* the arguments line: `"key": value, "key": value` up to `\n    }` */
static int args_line(cursor *c, int64_t *stream, int64_t *corr, int64_t *device, int64_t *bytes,
                     uint8_t *found) {
    while (c->p < c->end && *c->p == ' ') /* some records indent it further */
        c->p++;
    if (LIT(c, "\n    }")) /* no arguments */
        return 1;
    for (;;) {
        if (c->p >= c->end || *c->p != '"')
            return 0;
        const uint8_t *k = c->p + 1;
        if (!skip_string(c))
            return 0;
        int64_t kn = c->p - 1 - k;
        if (memchr(k, '\\', (size_t)kn))
            return 0; /* an escaped key could spell one we read: leave it to a JSON parser */
        if (!LIT(c, ": "))
            return 0;
        int64_t *slot = NULL;
        uint8_t bit = 0;
        if (key_is(k, kn, "stream"))
            slot = stream, bit = HAS_STREAM;
        else if (key_is(k, kn, "correlation"))
            slot = corr, bit = HAS_CORR;
        else if (key_is(k, kn, "device"))
            slot = device, bit = HAS_DEVICE;
        else if (key_is(k, kn, "bytes"))
            slot = bytes, bit = HAS_BYTES;
        if (slot) {
            if (!integer(c, slot))
                return 0;
            *found |= bit;
        } else if (!skip_value(c)) {
            return 0;
        }
        /* libkineto pads some separators with two spaces: `"External id": 2053,  "device"` */
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            while (c->p < c->end && *c->p == ' ')
                c->p++;
            continue;
        }
        return LIT(c, "\n    }");
    }
}

static const uint8_t *find(const uint8_t *p, const uint8_t *end, const char *s, size_t n) {
    if ((size_t)(end - p) < n)
        return NULL;
    return memmem(p, (size_t)(end - p), s, n);
}

/* Scan `buf[0:len)`; fill at most `cap` rows; return the number of complete events read (other
 * than libkineto's `Trace` spans, which put `ts` before `name` and no metric uses), GIVE_UP when
 * the batch is not in the layout exactly, NO_ROOM when `cap` is too small. */
int64_t kineto_scan(const uint8_t *buf, int64_t len, int64_t cap, int64_t *cat_lo,
                    int64_t *cat_len, uint64_t *cat_hash, int64_t *name_lo,
                    int64_t *name_len, uint64_t *name_hash, int64_t *pid, int64_t *tid,
                    int64_t *ts, int64_t *dur, int64_t *stream, int64_t *corr, int64_t *device,
                    int64_t *nbytes, uint8_t *found) {
    const uint8_t *end = buf + len;
    const uint8_t *at = buf;
    int64_t n = 0;
    /* `\u` can spell any key (`"p\u0068"` is "ph" to a JSON parser): leave such text to one */
    if (find(buf, end, "\\u", 2) != NULL)
        return GIVE_UP;
    /* Every `"ph"` outside the events read is an event's phase key, `"ph": "P"` exactly: so no
     * complete event goes unseen in another spelling (`"ph":  "X"`), and a `"ph"` that is a
     * value somewhere gives the batch up rather than hide one. */
    while ((at = find(at, end, "\"ph\"", 4)) != NULL) {
        cursor c = {at + 4, end};
        if (!LIT(&c, ": \""))
            return GIVE_UP;
        if (!LIT(&c, "X\"")) {
            at = c.p; /* another phase: not read here */
            continue;
        }
        /* a complete event opens its line: `\n    "ph": "X", "cat": "` */
        if (at - buf < 5 || memcmp(at - 5, "\n    ", 5) != 0)
            return GIVE_UP;
        if (!LIT(&c, ", \"cat\": \""))
            return GIVE_UP;
        if ((size_t)(end - c.p) >= 12 && memcmp(c.p, "Trace\", \"ts\"", 12) == 0) {
            at = c.p; /* libkineto's `Trace` span: no metric reads it */
            continue;
        }
        if (n >= cap)
            return NO_ROOM;
        const uint8_t *lo;
        int64_t m;
        uint64_t h;
        if (!plain_string(&c, &lo, &m, &h))
            return GIVE_UP;
        cat_lo[n] = lo - buf;
        cat_len[n] = m;
        cat_hash[n] = h;
        if (!LIT(&c, "\", \"name\": \"") || !plain_string(&c, &lo, &m, &h))
            return GIVE_UP;
        name_lo[n] = lo - buf;
        name_len[n] = m;
        name_hash[n] = h;
        if (!LIT(&c, "\", \"pid\": ") || !integer(&c, &pid[n]))
            return GIVE_UP;
        if (!LIT(&c, ", \"tid\": ") || !integer(&c, &tid[n]))
            return GIVE_UP;
        if (!LIT(&c, ",\n    \"ts\": ") || !micros_as_ns(&c, &ts[n]))
            return GIVE_UP;
        if (!LIT(&c, ", \"dur\": ") || !micros_as_ns(&c, &dur[n]))
            return GIVE_UP;
        stream[n] = -1;
        corr[n] = -1;
        device[n] = -1;
        nbytes[n] = 0;
        found[n] = 0;
        if (LIT(&c, ",\n    \"args\": {\n      ")) {
            if (!args_line(&c, &stream[n], &corr[n], &device[n], &nbytes[n], &found[n]))
                return GIVE_UP;
        }
        if (!LIT(&c, "\n  }"))
            return GIVE_UP;
        n++;
        at = c.p;
    }
    return n;
}

/* How many of the n strings buf[lo[i] : lo[i] + len[i]) differ from buf[rlo[i] : rlo[i] + len[i])
 * (strings grouped by hash: each checked against its group's first member). */
int64_t kineto_differ(const uint8_t *buf, int64_t n, const int64_t *lo, const int64_t *len,
                      const int64_t *rlo, const int64_t *rlen) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (len[i] != rlen[i] || (lo[i] != rlo[i] && memcmp(buf + lo[i], buf + rlo[i], len[i]) != 0))
            bad++;
    return bad;
}
