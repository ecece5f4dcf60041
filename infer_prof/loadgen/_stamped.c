/* The client's per-read hot path in C: read a stream socket, take the kernel's receive time,
 * and count the tokens of a vLLM token chunk, without running Python for the common case.
 *
 * Same logic, line for line, as the pure-Python reader in client.py (which is used where this
 * extension was not built); the tests run both. At 1024 streams a client reads ~68,000 times a
 * second; in Python each read cost ~11 us of interpreter time on top of the ~4.5 us the kernel
 * spends, which on a 2-core machine shared with the server was enough to fall behind.
 *
 * StampedReader(fd, chunk_ns, chunk_tokens, lags, general, failed, on_token, report_every)
 *   called with no arguments whenever fd is readable (loop.add_reader):
 *   - recvmsg() into a reused buffer; t_ns = the kernel's receive time (SO_TIMESTAMPNS) moved
 *     onto CLOCK_MONOTONIC (= time.perf_counter_ns): now_mono - (now_real - kernel_real),
 *     never later than now_mono; lags gets now_mono - t_ns.
 *   - if `fast` (the HTTP parser is at a chunk boundary) and the read is exactly one token
 *     chunk, the completion-token count advances chunk_ns/chunk_tokens; on_token(k) is called
 *     every report_every tokens. The chunk's kind (chunk_kind: reasoning, answer or neither)
 *     is kept as two numbers, not a list: reasoning_ct (tokens of reasoning chunks) and
 *     first_answer (the index in chunk_ns of the first answer chunk, -1 before it); a stream
 *     that answered before any reasoning is not classified further (a plain model's stream
 *     pays for its first chunk only).
 *   - otherwise general(data, t_ns) -> bool is called (data b"" at end of stream); its result
 *     is the new `fast`. A receive error calls failed(errno).
 *   - with decrypt (keyword; TLS, see loadgen/tls.py) the bytes read are ciphertext:
 *     decrypt(data) -> the plaintext they complete, handled as above with the read's kernel
 *     time (that of the segment completing the TLS record); b"" (no application data) ends it.
 *
 * ReaderGroup(): many readers behind one epoll set, so that the event loop wakes once for all the
 *   sockets that are readable together (a server step sends a token to every running stream at
 *   once) and the reads run here, not through one asyncio handle per read. The loop watches the
 *   group's own fd (loop.add_reader(group.fileno(), group)); group() reads every ready reader
 *   once (level-triggered: data left unread is reported again). add(reader) / remove(reader)
 *   before the socket closes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#ifndef __linux__
#error "kernel receive timestamps (SO_TIMESTAMPNS) are Linux-only; the Python reader is used"
#endif

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/uio.h>
#include <time.h>

#ifndef SO_TIMESTAMPNS
#define SO_TIMESTAMPNS 35
#endif
#ifndef SCM_TIMESTAMPNS
#define SCM_TIMESTAMPNS SO_TIMESTAMPNS
#endif

#define RECV_SIZE (256 * 1024)
/* One buffer for every reader: readers run with the GIL held and never release it. */
static char recv_buf[RECV_SIZE];

static const char FINISH_NULL[] = "\"finish_reason\":null";
static const char COMPLETION[] = "\"completion_tokens\":";

static void *find(const char *hay, Py_ssize_t n, const char *needle, Py_ssize_t m)
{
    return memmem(hay, (size_t)n, needle, (size_t)m);
}

/* Whether b[0:n] is valid UTF-8 as Python's strict decoder sees it: no overlong forms, no
 * surrogates (U+D800..U+DFFF), nothing above U+10FFFF. ASCII (the common case) is one pass. */
static int valid_utf8(const unsigned char *b, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) { /* eight ASCII bytes at a time: the common case */
            uint64_t w;
            memcpy(&w, b + i, 8);
            if ((w & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = b[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0; /* no overlong 3-byte forms */
            else if (c == 0xED)
                hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90; /* no overlong 4-byte forms */
            else if (c == 0xF4)
                hi = 0x8F; /* nothing above U+10FFFF */
        } else
            return 0;
        if (i + need >= n) /* the sequence is cut off */
            return 0;
        if (b[i + 1] < lo || b[i + 1] > hi)
            return 0;
        for (Py_ssize_t k = 2; k <= need; k++)
            if (b[i + k] < 0x80 || b[i + k] > 0xBF)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* Completion tokens if b[0:n] is exactly one HTTP chunk holding one SSE data line with
 * "finish_reason":null and then "completion_tokens":<digits>, all valid UTF-8; -1 for anything
 * else. The same test as stamped_reader.match_token_chunk_py. */
static long long match_token_chunk(const char *b, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    unsigned long long size = 0;
    while (i < n && i < 8) {
        char c = b[i];
        int v;
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else
            break;
        size = size * 16 + (unsigned long long)v;
        i++;
    }
    if (i == 0 || i + 2 > n || b[i] != '\r' || b[i + 1] != '\n')
        return -1;
    const char *line = b + i + 2;
    Py_ssize_t rest = n - i - 2; /* the data line, then "\n\n\r\n" */
    if (rest < 10 || (unsigned long long)(rest - 2) != size)
        return -1;
    if (memcmp(b + n - 4, "\n\n\r\n", 4) != 0)
        return -1;
    Py_ssize_t len = rest - 4;
    if (memcmp(line, "data: ", 6) != 0 || memchr(line, '\n', (size_t)len) != NULL)
        return -1;
    const char *fr = find(line, len, FINISH_NULL, sizeof FINISH_NULL - 1);
    if (fr == NULL)
        return -1;
    const char *p = fr + (sizeof FINISH_NULL - 1);
    const char *end = line + len;
    const char *ct = NULL; /* the last occurrence, as the regex's greedy [^\n]* finds it */
    for (const char *q; (q = find(p, end - p, COMPLETION, sizeof COMPLETION - 1)) != NULL;
         p = q + 1) {
        const char *d = q + (sizeof COMPLETION - 1);
        if (d < end && *d >= '0' && *d <= '9')
            ct = q;
    }
    if (ct == NULL)
        return -1;
    const char *d = ct + (sizeof COMPLETION - 1);
    long long value = 0;
    int digits = 0;
    while (d < end && *d >= '0' && *d <= '9') {
        if (++digits > 18)
            return -1;
        value = value * 10 + (*d - '0');
        d++;
    }
    /* invalid UTF-8 goes to the general parser, which fails the request (invalid_utf8) */
    if (!valid_utf8((const unsigned char *)b, n))
        return -1;
    return value;
}

/* What a token chunk carries, read from the keys of its "delta" object (walked here, values
 * skipped, strings with their escapes: the cost is the delta's length, a token's text): ANSWER
 * when "content" is a non-empty string or "tool_calls" a non-empty array, else REASONING when
 * "reasoning" (vLLM >= 0.10) or "reasoning_content" is a string, else ANSWER when "content" is
 * an empty string (a partial UTF-8 sequence), else NEITHER (also for a delta it cannot walk); a
 * chunk with no "delta" (the completions API's "text") is ANSWER. The same rule as
 * stamped_reader.chunk_kind_py and client.chunk_kind_of. A JSON string cannot hold an unescaped
 * quote, so the first "delta":{ found is the key. */
#define KIND_NEITHER 0
#define KIND_ANSWER 1
#define KIND_REASONING 2
static const char DELTA[] = "\"delta\":{";

/* p at a JSON string's opening quote: the byte after its closing quote, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* p at a JSON value: the byte after it, or NULL. */
static const char *skip_value(const char *p, const char *end)
{
    if (p >= end)
        return NULL;
    if (*p == '"')
        return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < end) {
            if (*p == '"') {
                p = skip_string(p, end);
                if (p == NULL)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if ((*p == '}' || *p == ']') && --depth == 0)
                return p + 1;
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}') /* null, true, false, a number */
        p++;
    return p;
}

static int key_is(const char *k, Py_ssize_t len, const char *name)
{
    return (Py_ssize_t)strlen(name) == len && memcmp(k, name, (size_t)len) == 0;
}

static int chunk_kind(const char *b, Py_ssize_t n)
{
    const char *d = find(b, n, DELTA, sizeof DELTA - 1);
    if (d == NULL)
        return KIND_ANSWER;
    const char *p = d + (sizeof DELTA - 1), *end = b + n;
    int reasoning = 0, empty_content = 0;
    while (p < end && *p == '"') {
        const char *key = p + 1, *after = skip_string(p, end);
        if (after == NULL || after + 1 >= end || *after != ':')
            return KIND_NEITHER;
        Py_ssize_t klen = (after - 1) - key;
        const char *v = after + 1, *next = skip_value(v, end);
        if (next == NULL)
            return KIND_NEITHER;
        if (key_is(key, klen, "content") && *v == '"') {
            if (v[1] != '"')
                return KIND_ANSWER;
            empty_content = 1;
        } else if (key_is(key, klen, "tool_calls") && *v == '[' && v + 1 < end && v[1] != ']') {
            return KIND_ANSWER;
        } else if ((key_is(key, klen, "reasoning") || key_is(key, klen, "reasoning_content")) &&
                   *v == '"') {
            reasoning = 1;
        }
        p = next;
        if (p < end && *p == ',')
            p++;
    }
    if (p >= end || *p != '}')
        return KIND_NEITHER;
    return reasoning ? KIND_REASONING : empty_content ? KIND_ANSWER : KIND_NEITHER;
}

typedef struct {
    PyObject_HEAD
    int fd;
    int fast;
    long long last_ct;
    long long reported;
    long long report_every;
    long long reasoning_ct; /* tokens of reasoning chunks */
    long long first_answer; /* index in chunk_ns of the first answer chunk; -1: none yet */
    PyObject *chunk_ns;
    PyObject *chunk_tokens;
    PyObject *lags;
    PyObject *general;
    PyObject *failed;
    PyObject *on_token;
    PyObject *decrypt; /* NULL or None: plain HTTP */
    int grouped;       /* registered in a ReaderGroup (which holds a reference) */
} Reader;

static int Reader_traverse(Reader *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chunk_ns);
    Py_VISIT(self->chunk_tokens);
    Py_VISIT(self->lags);
    Py_VISIT(self->general);
    Py_VISIT(self->failed);
    Py_VISIT(self->on_token);
    Py_VISIT(self->decrypt);
    return 0;
}

static int Reader_clear(Reader *self)
{
    Py_CLEAR(self->chunk_ns);
    Py_CLEAR(self->chunk_tokens);
    Py_CLEAR(self->lags);
    Py_CLEAR(self->general);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->on_token);
    Py_CLEAR(self->decrypt);
    return 0;
}

static void Reader_dealloc(Reader *self)
{
    PyObject_GC_UnTrack(self);
    Reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "chunk_ns", "chunk_tokens", "lags", "general", "failed",
                             "on_token", "report_every", "decrypt", NULL};
    int fd;
    PyObject *chunk_ns, *chunk_tokens, *lags, *general, *failed, *on_token;
    PyObject *decrypt = Py_None;
    long long report_every = 16;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iO!O!O!OOO|LO", kwlist, &fd, &PyList_Type,
                                     &chunk_ns, &PyList_Type, &chunk_tokens, &PyList_Type, &lags,
                                     &general, &failed, &on_token, &report_every, &decrypt))
        return -1;
    if (!PyCallable_Check(general) || !PyCallable_Check(failed) ||
        (on_token != Py_None && !PyCallable_Check(on_token)) ||
        (decrypt != Py_None && !PyCallable_Check(decrypt))) {
        PyErr_SetString(PyExc_TypeError, "general, failed, on_token and decrypt must be callables");
        return -1;
    }
    if (self->grouped) {
        PyErr_SetString(PyExc_RuntimeError, "StampedReader is in a ReaderGroup");
        return -1;
    }
    self->fd = fd;
    self->fast = 0;
    self->last_ct = 0;
    self->reported = 0;
    self->report_every = report_every;
    self->reasoning_ct = 0;
    self->first_answer = -1;
    Py_INCREF(chunk_ns);
    Py_XSETREF(self->chunk_ns, chunk_ns);
    Py_INCREF(chunk_tokens);
    Py_XSETREF(self->chunk_tokens, chunk_tokens);
    Py_INCREF(lags);
    Py_XSETREF(self->lags, lags);
    Py_INCREF(general);
    Py_XSETREF(self->general, general);
    Py_INCREF(failed);
    Py_XSETREF(self->failed, failed);
    Py_INCREF(on_token);
    Py_XSETREF(self->on_token, on_token);
    if (decrypt == Py_None) {
        Py_CLEAR(self->decrypt);
    } else {
        Py_INCREF(decrypt);
        Py_XSETREF(self->decrypt, decrypt);
    }
    return 0;
}

static int append_ll(PyObject *list, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    int r = PyList_Append(list, o);
    Py_DECREF(o);
    return r;
}

static inline long long ns(const struct timespec *ts)
{
    return (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static PyObject *Reader_call(Reader *self, PyObject *args, PyObject *kwds)
{
    if (self->general == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "StampedReader is not initialised or closed");
        return NULL;
    }
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {recv_buf, RECV_SIZE};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;

    ssize_t n = recvmsg(self->fd, &msg, MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            Py_RETURN_NONE;
        return PyObject_CallFunction(self->failed, "i", errno);
    }
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    long long now = ns(&mono);
    long long t = now;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec kernel, wall;
            memcpy(&kernel, CMSG_DATA(c), sizeof kernel);
            clock_gettime(CLOCK_REALTIME, &wall);
            t = now - (ns(&wall) - ns(&kernel));
            if (t > now) /* the two clocks were read a few ns apart */
                t = now;
            break;
        }
    }
    if (append_ll(self->lags, now - t) < 0)
        return NULL;

    const char *data = recv_buf;
    Py_ssize_t len = (Py_ssize_t)n;
    PyObject *plain = NULL; /* TLS: the decrypted bytes (owned) */
    if (n > 0 && self->decrypt != NULL) {
        plain = PyObject_CallFunction(self->decrypt, "y#", recv_buf, (Py_ssize_t)n);
        if (plain == NULL)
            return NULL;
        if (!PyBytes_Check(plain)) {
            Py_DECREF(plain);
            PyErr_SetString(PyExc_TypeError, "decrypt must return bytes");
            return NULL;
        }
        len = PyBytes_GET_SIZE(plain);
        if (len == 0) {
            Py_DECREF(plain);
            Py_RETURN_NONE;
        }
        data = PyBytes_AS_STRING(plain);
    }

    if (len > 0 && self->fast) {
        long long ct = match_token_chunk(data, len);
        if (ct >= 0) {
            Py_XDECREF(plain);
            if (ct > self->last_ct) {
                /* a stream whose first counted chunk was answer is not classified further */
                if (self->first_answer < 0 || self->reasoning_ct > 0) {
                    int kind = chunk_kind(data, len);
                    if (kind == KIND_REASONING)
                        self->reasoning_ct += ct - self->last_ct;
                    else if (kind == KIND_ANSWER && self->first_answer < 0)
                        self->first_answer = PyList_GET_SIZE(self->chunk_ns);
                }
                if (append_ll(self->chunk_ns, t) < 0 ||
                    append_ll(self->chunk_tokens, ct - self->last_ct) < 0)
                    return NULL;
                self->last_ct = ct;
                if (ct - self->reported >= self->report_every && self->on_token != Py_None) {
                    PyObject *r = PyObject_CallFunction(self->on_token, "L", ct - self->reported);
                    if (r == NULL)
                        return NULL;
                    Py_DECREF(r);
                    self->reported = ct;
                }
            }
            Py_RETURN_NONE;
        }
    }
    PyObject *r = plain != NULL
                      ? PyObject_CallFunction(self->general, "OL", plain, t)
                      : PyObject_CallFunction(self->general, "y#L", recv_buf, len, t);
    Py_XDECREF(plain);
    if (r == NULL)
        return NULL;
    int fast = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (fast < 0)
        return NULL;
    self->fast = fast;
    Py_RETURN_NONE;
}

static PyObject *Reader_close(Reader *self, PyObject *Py_UNUSED(ignored))
{
    /* Drop the callbacks: they are closures that refer back to this reader, a reference cycle
     * per request that only the (paused) garbage collector could free. */
    Py_CLEAR(self->general);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->on_token);
    Py_CLEAR(self->decrypt);
    Py_RETURN_NONE;
}

static PyMethodDef Reader_methods[] = {
    {"close", (PyCFunction)Reader_close, METH_NOARGS,
     "Forget the callbacks (the request is over); later calls raise."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef Reader_members[] = {
    {"fd", T_INT, offsetof(Reader, fd), READONLY, "the socket's file descriptor"},
    {"fast", T_INT, offsetof(Reader, fast), 0, "1 while the HTTP parser is at a chunk boundary"},
    {"last_ct", T_LONGLONG, offsetof(Reader, last_ct), 0, "completion tokens so far (usage)"},
    {"reported", T_LONGLONG, offsetof(Reader, reported), 0, "tokens passed to on_token so far"},
    {"reasoning_ct", T_LONGLONG, offsetof(Reader, reasoning_ct), 0,
     "tokens of reasoning chunks so far"},
    {"first_answer", T_LONGLONG, offsetof(Reader, first_answer), 0,
     "index in chunk_ns of the first answer chunk (-1: none yet)"},
    {NULL}};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "infer_prof.loadgen._stamped.StampedReader",
    .tp_doc = PyDoc_STR("Reads one stream socket per call, with kernel receive times."),
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_traverse = (traverseproc)Reader_traverse,
    .tp_clear = (inquiry)Reader_clear,
    .tp_call = (ternaryfunc)Reader_call,
    .tp_members = Reader_members,
    .tp_methods = Reader_methods,
};

/* ---- ReaderGroup ---------------------------------------------------------------------- */

#define GROUP_EVENTS 512

typedef struct {
    PyObject_HEAD
    int epfd;
    Py_ssize_t members;
    long long wakeups; /* calls that found at least one ready reader */
    long long reads;   /* reader calls made */
} Group;

static int Group_init(Group *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist))
        return -1;
    if (self->epfd >= 0)
        close(self->epfd);
    self->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (self->epfd < 0) {
        self->epfd = -1;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->members = 0;
    self->wakeups = 0;
    self->reads = 0;
    return 0;
}

static void Group_dealloc(Group *self)
{
    /* members hold no reference to the group; each reader's reference is held by the group
     * only while registered, and a live group with members is kept alive by the event loop */
    if (self->epfd >= 0)
        close(self->epfd);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_reader(Group *self, PyObject *arg)
{
    if (self->epfd < 0) {
        PyErr_SetString(PyExc_RuntimeError, "ReaderGroup is closed");
        return -1;
    }
    if (!PyObject_TypeCheck(arg, &ReaderType)) {
        PyErr_SetString(PyExc_TypeError, "ReaderGroup holds StampedReader objects only");
        return -1;
    }
    return 0;
}

static PyObject *Group_add(Group *self, PyObject *arg)
{
    if (check_reader(self, arg) < 0)
        return NULL;
    Reader *r = (Reader *)arg;
    if (r->grouped) {
        PyErr_SetString(PyExc_RuntimeError, "the reader is already in a ReaderGroup");
        return NULL;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = r;
    if (epoll_ctl(self->epfd, EPOLL_CTL_ADD, r->fd, &ev) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_INCREF(r);
    r->grouped = 1;
    self->members++;
    Py_RETURN_NONE;
}

static PyObject *Group_remove(Group *self, PyObject *arg)
{
    if (check_reader(self, arg) < 0)
        return NULL;
    Reader *r = (Reader *)arg;
    if (!r->grouped)
        Py_RETURN_FALSE;
    struct epoll_event ev; /* ignored, but kernels before 2.6.9 want one */
    int rc = epoll_ctl(self->epfd, EPOLL_CTL_DEL, r->fd, &ev);
    int err = errno;
    r->grouped = 0;
    self->members--;
    Py_DECREF(r);
    /* EBADF/ENOENT: the socket was closed first, which already took it out of the set */
    if (rc < 0 && err != EBADF && err != ENOENT) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_TRUE;
}

/* Read every reader that is ready now, once each. Called by the event loop when the group's
 * fd is readable. A reader's exception stops the round and is raised (the loop reports it as it
 * would a reader callback's); the readers not reached are still ready and come next round. */
static PyObject *Group_call(Group *self, PyObject *args, PyObject *kwds)
{
    if (self->epfd < 0) {
        PyErr_SetString(PyExc_RuntimeError, "ReaderGroup is closed");
        return NULL;
    }
    struct epoll_event ev[GROUP_EVENTS];
    int n = epoll_wait(self->epfd, ev, GROUP_EVENTS, 0);
    if (n < 0) {
        if (errno == EINTR)
            Py_RETURN_NONE;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (n == 0)
        Py_RETURN_NONE;
    self->wakeups++;
    /* a reader's callbacks may remove another ready reader (dropping the group's reference):
     * hold each for the round, and skip any no longer grouped */
    for (int i = 0; i < n; i++)
        Py_INCREF((PyObject *)ev[i].data.ptr);
    int failed = 0;
    for (int i = 0; i < n && !failed; i++) {
        Reader *r = (Reader *)ev[i].data.ptr;
        if (!r->grouped || r->general == NULL)
            continue;
        self->reads++;
        PyObject *res = Reader_call(r, NULL, NULL);
        if (res == NULL)
            failed = 1;
        else
            Py_DECREF(res);
    }
    for (int i = 0; i < n; i++)
        Py_DECREF((PyObject *)ev[i].data.ptr);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Group_fileno(Group *self, PyObject *Py_UNUSED(ignored))
{
    if (self->epfd < 0) {
        PyErr_SetString(PyExc_ValueError, "ReaderGroup is closed");
        return NULL;
    }
    return PyLong_FromLong(self->epfd);
}

static PyObject *Group_close(Group *self, PyObject *Py_UNUSED(ignored))
{
    if (self->members > 0) {
        PyErr_SetString(PyExc_RuntimeError, "ReaderGroup still has readers");
        return NULL;
    }
    if (self->epfd >= 0)
        close(self->epfd);
    self->epfd = -1;
    Py_RETURN_NONE;
}

static PyMethodDef Group_methods[] = {
    {"add", (PyCFunction)Group_add, METH_O, "Watch a StampedReader's socket."},
    {"remove", (PyCFunction)Group_remove, METH_O,
     "Stop watching a reader's socket (before it is closed); False if it was not watched."},
    {"fileno", (PyCFunction)Group_fileno, METH_NOARGS,
     "The epoll fd, readable while any member is (for loop.add_reader)."},
    {"close", (PyCFunction)Group_close, METH_NOARGS, "Close the epoll fd (no members left)."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef Group_members[] = {
    {"members", T_PYSSIZET, offsetof(Group, members), READONLY, "readers watched now"},
    {"wakeups", T_LONGLONG, offsetof(Group, wakeups), READONLY,
     "calls that found a ready reader"},
    {"reads", T_LONGLONG, offsetof(Group, reads), READONLY, "reader calls made"},
    {NULL}};

static PyObject *Group_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Group *self = (Group *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->epfd = -1;
    return (PyObject *)self;
}

static PyTypeObject GroupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "infer_prof.loadgen._stamped.ReaderGroup",
    .tp_doc = PyDoc_STR("StampedReaders behind one epoll set: one event-loop wake-up for all "
                        "the sockets readable together."),
    .tp_basicsize = sizeof(Group),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Group_new,
    .tp_init = (initproc)Group_init,
    .tp_dealloc = (destructor)Group_dealloc,
    .tp_call = (ternaryfunc)Group_call,
    .tp_members = Group_members,
    .tp_methods = Group_methods,
};

static PyObject *py_match_token_chunk(PyObject *mod, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    long long r = match_token_chunk((const char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(r);
}

static PyObject *py_chunk_kind(PyObject *mod, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int r = chunk_kind((const char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(r);
}

static PyMethodDef methods[] = {
    {"match_token_chunk", py_match_token_chunk, METH_O,
     "Completion tokens if the bytes are exactly one vLLM token chunk, else -1."},
    {"chunk_kind", py_chunk_kind, METH_O,
     "What a token chunk carries: 0 neither, 1 answer (content, tool call, text), 2 reasoning."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stamped",
                                    "The client's per-read hot path in C.", -1, methods};

PyMODINIT_FUNC PyInit__stamped(void)
{
    if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&GroupType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "StampedReader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&GroupType);
    if (PyModule_AddObject(m, "ReaderGroup", (PyObject *)&GroupType) < 0) {
        Py_DECREF(&GroupType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
