/* One pass over a batch of trace events (the elements of the `traceEvents` array, without the
 * brackets), the columns the Kineto reader needs straight into caller-owned arrays (see
 * kineto_scan.py, which loads this with ctypes; no Python API here, so no Python headers are
 * needed to build it).
 *
 * Structure first: the batch must be JSON (RFC 8259: strings with valid escapes and UTF-8 and no
 * raw control character, numbers in JSON's grammar, true/false/null, nesting up to MAX_DEPTH),
 * a sequence of objects separated by single commas. Only those top-level objects are events:
 * an object inside another event's `args` is never one, whatever its layout, and text between
 * events that is not JSON gives the batch up (the caller then hands it to a JSON parser, which
 * refuses it in one sentence). Every byte of the batch is checked, so what is read is what a
 * JSON parser reads, or the batch is given up.
 *
 * An event's phase is its `"ph"` key at the top level of its object. Complete events (`X`) are
 * read in the layout libkineto writes for them:
 *
 *   {
 *     "ph": "X", "cat": "kernel", "name": "...", "pid": 0, "tid": 7,
 *     "ts": 4517054407644.900, "dur": 317.123,
 *     "args": {
 *       "External id": 2053,  "device": 0, "context": 1,  "stream": 7, "correlation": 25109
 *     }
 *   }
 *
 * checking every literal between the fields; anything else (another key order, a name with an
 * escape, a number in another notation, an integer beyond 64 bits, a `ph` key spelled with an
 * escape or given twice) gives the batch up. Other objects are validated and skipped; those of
 * phase `i` or `M` (memory and metadata records) are listed for the caller, which parses them
 * with a JSON parser. Integers are read to 64 bits: an unsigned value above 2^63 - 1 is kept as
 * the same 64 bits (the caller's int64 columns), never cut to fewer.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GIVE_UP (-1)
#define NO_ROOM (-2)
#define MAX_DEPTH 1000 /* deeper nesting is left to the JSON parser (orjson stops at 1024) */

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

static void ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* ---- JSON validation ------------------------------------------------------------------------ */

/* one UTF-8 sequence of 2 to 4 bytes at p (< end), its first byte >= 0x80 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF): its length, 0 when invalid */
static int utf8_seq(const uint8_t *p, const uint8_t *end) {
    uint8_t b = p[0];
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (end - p < n || p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* the 4 hex digits at p as a number, -1 when they are not there */
static int32_t hex4(const uint8_t *p, const uint8_t *end) {
    if (end - p < 4)
        return -1;
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        int d = is_digit(ch) ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
              : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* a JSON string at its opening quote, consumed; *escaped: it held an escape */
static int jv_string(cursor *c, int *escaped) {
    const uint8_t *p = c->p + 1;
    *escaped = 0;
    while (p < c->end) {
        uint8_t ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            return 1;
        }
        if (ch < 0x20)
            return 0;
        if (ch == '\\') {
            *escaped = 1;
            if (c->end - p < 2)
                return 0;
            uint8_t e = p[1];
            if (e == 'u') {
                /* a surrogate only as a high one followed by a low one (orjson's rule) */
                int32_t u = hex4(p + 2, c->end);
                if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF))
                    return 0;
                p += 6;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    int32_t low = c->end - p >= 2 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2, c->end) : -1;
                    if (low < 0xDC00 || low > 0xDFFF)
                        return 0;
                    p += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                p += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (ch >= 0x80) {
            int n = utf8_seq(p, c->end);
            if (!n)
                return 0;
            p += n;
            continue;
        }
        p++;
    }
    return 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, finite as a double (what orjson accepts) */
static int jv_number(cursor *c) {
    const uint8_t *p = c->p, *e = c->end, *start = c->p;
    if (p < e && *p == '-')
        p++;
    if (p >= e || !is_digit(*p))
        return 0;
    /* the decimal magnitude of the first significant digit, for the overflow check */
    int64_t mag = 0, zeros = 0;
    int seen = 0;
    if (*p == '0')
        p++;
    else
        while (p < e && is_digit(*p)) {
            mag += seen;
            seen = 1;
            p++;
        }
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !is_digit(*p))
            return 0;
        while (p < e && is_digit(*p)) {
            if (!seen) {
                if (*p == '0')
                    zeros++;
                else
                    seen = 1, mag = -(zeros + 1);
            }
            p++;
        }
    }
    int64_t exp = 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        int neg = 0;
        if (p < e && (*p == '+' || *p == '-'))
            neg = *p++ == '-';
        if (p >= e || !is_digit(*p))
            return 0;
        while (p < e && is_digit(*p)) {
            if (exp < 1000000)
                exp = exp * 10 + (*p - '0');
            p++;
        }
        if (neg)
            exp = -exp;
    }
    if (seen && mag + exp >= 307) { /* near or over DBL_MAX: ask strtod */
        if (mag + exp > 309 || p - start > 400)
            return 0;
        char tmp[401];
        memcpy(tmp, start, (size_t)(p - start));
        tmp[p - start] = 0;
        char *stop;
        double d = strtod(tmp, &stop);
        if (*stop != 0 || isinf(d))
            return 0;
    }
    c->p = p;
    return 1;
}

/* what the top level of an event's object holds: its `"ph"` keys and their value */
typedef struct {
    int nph;     /* `"ph"` keys */
    int ncat;    /* `"cat"` keys */
    uint8_t ph;  /* the first byte of the last one's value when it is a plain 1-byte string */
    int unclear; /* a key with an escape (it may spell "ph"), or a ph that is not such a string */
} top_t;

static int jv_value(cursor *c, int depth);

/* an object at its `{`, consumed; `top`: record its `"ph"` keys (the event's own level) */
static int jv_object(cursor *c, int depth, top_t *top) {
    if (depth > MAX_DEPTH)
        return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        if (c->p >= c->end || *c->p != '"')
            return 0;
        const uint8_t *k = c->p + 1;
        int escaped;
        if (!jv_string(c, &escaped))
            return 0;
        int is_ph = !escaped && c->p - 1 - k == 2 && k[0] == 'p' && k[1] == 'h';
        int is_cat = !escaped && c->p - 1 - k == 3 && memcmp(k, "cat", 3) == 0;
        ws(c);
        if (!LIT(c, ":"))
            return 0;
        ws(c);
        const uint8_t *v = c->p;
        if (!jv_value(c, depth + 1))
            return 0;
        if (top) {
            if (escaped)
                top->unclear = 1;
            top->ncat += is_cat;
            if (is_ph) {
                top->nph++;
                top->ph = 0;
                if (c->p - v == 3 && v[0] == '"' && v[1] != '\\' && v[1] < 0x80)
                    top->ph = v[1];
                else
                    top->unclear = 1;
            }
        }
        ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            ws(c);
            continue;
        }
        return LIT(c, "}");
    }
}

static int jv_array(cursor *c, int depth) {
    if (depth > MAX_DEPTH)
        return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 1;
    }
    for (;;) {
        if (!jv_value(c, depth + 1))
            return 0;
        ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            ws(c);
            continue;
        }
        return LIT(c, "]");
    }
}

/* any JSON value at the cursor (no white space before it), consumed */
static int jv_value(cursor *c, int depth) {
    if (c->p >= c->end)
        return 0;
    int escaped;
    switch (*c->p) {
    case '"': return jv_string(c, &escaped);
    case '{': return jv_object(c, depth, NULL);
    case '[': return jv_array(c, depth);
    case 't': return LIT(c, "true");
    case 'f': return LIT(c, "false");
    case 'n': return LIT(c, "null");
    default: return jv_number(c);
    }
}

/* ---- the fields of a complete event --------------------------------------------------------- */

/* -?(0|[1-9][0-9]*) as 64 bits: a negative value down to -2^63, a positive one up to 2^64 - 1
 * (above 2^63 - 1: the same 64 bits in the int64 column, as a C program's unsigned id is) */
static int integer(cursor *c, int64_t *out) {
    const uint8_t *p = c->p, *e = c->end;
    int neg = p < e && *p == '-';
    if (neg)
        p++;
    if (p >= e || !is_digit(*p) || (*p == '0' && p + 1 < e && is_digit(p[1])))
        return 0;
    uint64_t v = 0;
    while (p < e && is_digit(*p)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0; /* beyond 64 bits */
        v = v * 10 + d;
        p++;
    }
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E'))
        return 0; /* not an integer: a JSON parser gives its value */
    if (neg && v > (uint64_t)INT64_MAX + 1)
        return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    c->p = p;
    return 1;
}

/* microseconds with at most three decimals (-?(0|[1-9][0-9]*)(\.[0-9]{1,3})?) as integer
 * nanoseconds, exactly: no float in between; a value whose nanoseconds do not fit int64 is
 * left to the JSON parser (the reader then refuses it in one sentence) */
static int micros_as_ns(cursor *c, int64_t *out) {
    const uint8_t *p = c->p, *e = c->end;
    int neg = p < e && *p == '-';
    if (neg)
        p++;
    if (p >= e || !is_digit(*p) || (*p == '0' && p + 1 < e && is_digit(p[1])))
        return 0;
    uint64_t whole = 0;
    while (p < e && is_digit(*p)) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > (uint64_t)INT64_MAX / 1000)
            return 0;
        p++;
    }
    uint64_t frac = 0;
    if (p < e && *p == '.') {
        p++;
        int nd = 0;
        while (p < e && is_digit(*p)) {
            if (++nd > 3)
                return 0;
            frac = frac * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (nd == 0)
            return 0;
        for (int k = nd; k < 3; k++)
            frac *= 10;
    }
    if (p < e && (*p == 'e' || *p == 'E'))
        return 0;
    uint64_t ns = whole * 1000 + frac; /* < 2^63: whole <= INT64_MAX / 1000 */
    if (ns > (uint64_t)INT64_MAX)
        return 0;
    /* "-0.5": the sign belongs to the fraction too */
    *out = neg ? -(int64_t)ns : (int64_t)ns;
    c->p = p;
    return 1;
}

/* a string's body up to its closing quote (not consumed): no escape, no control character,
 * valid UTF-8, so the bytes are the text */
static int plain_string(cursor *c, const uint8_t **lo, int64_t *n, uint64_t *hash) {
    const uint8_t *p = c->p;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    while (p < c->end && *p != '"') {
        if (*p == '\\' || *p < 0x20)
            return 0;
        if (*p >= 0x80) {
            int k = utf8_seq(p, c->end);
            if (!k)
                return 0;
            for (int i = 0; i < k; i++)
                h = (h ^ p[i]) * 1099511628211ULL;
            p += k;
            continue;
        }
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
        int escaped;
        if (!jv_string(c, &escaped) || escaped)
            return 0; /* an escaped key could spell one we read: leave it to a JSON parser */
        int64_t kn = c->p - 1 - k;
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
        } else if (!jv_value(c, 3)) {
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

#define X_OPEN "{\n    \"ph\": \"X\", \"cat\": \""

/* Scan `buf[0:len)`: the elements of a traceEvents array (see the top of this file). Fill at
 * most `cap` rows with the complete events read (other than libkineto's `Trace` spans, which
 * put `ts` before `name` and no metric uses), and at most `ocap` (start, end) byte ranges with
 * the objects of phase `i` or `M` (*nother of them). Returns the number of complete events
 * read, GIVE_UP when the batch is not JSON or holds an event not in the layout, NO_ROOM when a
 * capacity is too small. */
int64_t kineto_scan(const uint8_t *buf, int64_t len, int64_t cap, int64_t *cat_lo,
                    int64_t *cat_len, uint64_t *cat_hash, int64_t *name_lo,
                    int64_t *name_len, uint64_t *name_hash, int64_t *pid, int64_t *tid,
                    int64_t *ts, int64_t *dur, int64_t *stream, int64_t *corr, int64_t *device,
                    int64_t *nbytes, uint8_t *found, int64_t ocap, int64_t *other_lo,
                    int64_t *other_hi, int64_t *nother) {
    cursor c = {buf, buf + len};
    int64_t n = 0;
    *nother = 0;
    ws(&c);
    if (c.p >= c.end)
        return 0;
    for (;;) {
        if (c.p >= c.end || *c.p != '{')
            return GIVE_UP; /* only objects are events */
        const uint8_t *start = c.p;
        cursor x = c;
        int trace = LIT(&x, X_OPEN) && (size_t)(x.end - x.p) >= 12 &&
                    memcmp(x.p, "Trace\", \"ts\"", 12) == 0;
        if (x.p != start && !trace) {
            if (n >= cap)
                return NO_ROOM;
            const uint8_t *lo;
            int64_t m;
            uint64_t h;
            if (!plain_string(&x, &lo, &m, &h))
                return GIVE_UP;
            cat_lo[n] = lo - buf;
            cat_len[n] = m;
            cat_hash[n] = h;
            if (!LIT(&x, "\", \"name\": \"") || !plain_string(&x, &lo, &m, &h))
                return GIVE_UP;
            name_lo[n] = lo - buf;
            name_len[n] = m;
            name_hash[n] = h;
            if (!LIT(&x, "\", \"pid\": ") || !integer(&x, &pid[n]))
                return GIVE_UP;
            if (!LIT(&x, ", \"tid\": ") || !integer(&x, &tid[n]))
                return GIVE_UP;
            if (!LIT(&x, ",\n    \"ts\": ") || !micros_as_ns(&x, &ts[n]))
                return GIVE_UP;
            if (!LIT(&x, ", \"dur\": ") || !micros_as_ns(&x, &dur[n]))
                return GIVE_UP;
            stream[n] = -1;
            corr[n] = -1;
            device[n] = -1;
            nbytes[n] = 0;
            found[n] = 0;
            if (LIT(&x, ",\n    \"args\": {\n      ")) {
                if (!args_line(&x, &stream[n], &corr[n], &device[n], &nbytes[n], &found[n]))
                    return GIVE_UP;
            }
            if (!LIT(&x, "\n  }"))
                return GIVE_UP;
            n++;
            c = x;
        } else {
            /* any other object: validated; its phase from its own top-level "ph" key */
            top_t top = {0, 0, 0, 0};
            if (!jv_object(&c, 1, &top))
                return GIVE_UP;
            if (x.p != start) { /* libkineto's `Trace` span, in its layout: its category once */
                if (top.unclear || top.nph != 1 || top.ncat != 1)
                    return GIVE_UP;
            } else {
                if (top.unclear || top.nph > 1 || (top.nph == 1 && top.ph == 'X'))
                    return GIVE_UP; /* a complete event in another layout: a JSON parser reads it */
                if (top.nph == 1 && (top.ph == 'i' || top.ph == 'M')) {
                    if (*nother >= ocap)
                        return NO_ROOM;
                    other_lo[*nother] = start - buf;
                    other_hi[*nother] = c.p - buf;
                    (*nother)++;
                }
            }
        }
        ws(&c);
        if (c.p >= c.end)
            return n;
        if (*c.p != ',')
            return GIVE_UP;
        c.p++;
        ws(&c);
    }
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
