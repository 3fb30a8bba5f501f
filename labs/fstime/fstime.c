/*
 * fstime.c -- file write / read / copy throughput, after UnixBench fstime.
 *
 * What it measures
 *   How many KiB per second one process can push through write(2), read(2)
 *   or a read(2)+write(2) copy loop on a small file of the given size, with
 *   the given buffer size.  With the UnixBench sizes (2 MB and smaller
 *   files, no O_SYNC/O_DIRECT/fsync in the loop) the data stays in the page
 *   cache, so in practice this measures the VFS/page-cache system-call path
 *   (syscall entry, file locking, copy_to/from_user, page-cache lookup,
 *   dirtying), not the disk.
 *
 * Method and source
 *   UnixBench fstime.c (BYTE UNIX Benchmarks, repository
 *   kdlucas/byte-unixbench, file UnixBench/src/fstime.c, master at
 *   986b674a1e50 (release 6.0.0, May 2025)).  This is an independent
 *   re-implementation of that method:
 *   - Two files dummy0-<pid> and dummy1-<pid> in the directory, opened
 *     read-write (created/truncated); file size = (max_blocks*1024/bufsize)
 *     * bufsize bytes; the buffer holds the bytes i & 0xff.
 *   - Phases run per mode, exactly as UnixBench:
 *       -w  write for -t s
 *       -r  write 2 s (creates the file), then read for -t s
 *       -c  write 2 s, read 2 s, then copy for -t s  (the default)
 *     (the 2 s of priming are -p, ours: UnixBench's w_test(2), r_test(2)
 *     by default)
 *   - Before each phase: sync(), sleep S, sync(), sleep S (before the copy
 *     phase the second sleep is S/2).  UnixBench sleeps 2,2 / 2,2 / 2,1 s,
 *     i.e. our default -s 2.  sync() flushes the whole system, which can
 *     take longer on a busy machine (outside the timed phase).
 *   - write: write the whole file buffer by buffer, rewind, repeat; the
 *     deadline is only looked at after a full pass.
 *   - read: read buffer by buffer, rewind at end of file; the deadline is
 *     looked at after every buffer.
 *   - copy: read a buffer from dummy0, write it to dummy1; at end of
 *     dummy0 rewind both; the deadline is looked at after every buffer.
 *     Each copied byte counts once.
 *   - The deadline is an interval timer (setitimer) whose SIGALRM handler
 *     sets a flag, as UnixBench's alarm(); so the per-buffer check is one
 *     memory load and does not add a clock read to every 1 KiB read.
 *   - score = bytes / 1024 / elapsed seconds (KiB/s), elapsed measured on
 *     the true clock around the phase (UnixBench: the same formula in
 *     256-byte units, printed truncated to an integer).
 *   Deliberate differences:
 *   - Elapsed time from CLOCK_MONOTONIC (UnixBench: gettimeofday).
 *   - The buffer is a static array aligned to 64 bytes, so its cache-line
 *     alignment does not depend on the build (UnixBench's static buffer
 *     happened to sit at 32 mod 64 in our x86-64 build).
 *   - -t and -s accept fractional seconds (UnixBench: whole seconds); -s
 *     and -p are ours (UnixBench's sleeps and priming phases are fixed):
 *     a short -p only shortens the write and read that fill and warm the
 *     file before the measured phase.
 *   - Bytes are counted exactly.  UnixBench counts 256-byte units and
 *     gives rounded part credit for short transfers; for buffer sizes that
 *     are multiples of 256 (all UnixBench uses) the counts are identical.
 *     A short write is completed, not cut off; a short read at end of
 *     file in copy mode is not written or counted (as UnixBench).
 *   - Files are removed on SIGINT/SIGTERM/SIGHUP/SIGPIPE too (exit status
 *     128+signal); any I/O error removes them and exits 1.
 *   - Option checking is strict (see exit status); UnixBench uses atoi().
 *
 * Usage
 *   fstime [-c|-r|-w] [-t seconds] [-d dir] [-b bufsize] [-m max_blocks]
 *          [-s settle_seconds] [-p prime_seconds]
 *   fstime -h | --help
 *   Defaults: -c -t 10 -d . -b 1024 -m 2000 -s 2 -p 2 (UnixBench's defaults;
 *   UnixBench's Run uses -t 30 with -b 1024 -m 2000, -b 256 -m 500 and
 *   -b 4096 -m 8000).  bufsize 256..8192, max_blocks 1..1048576 and at
 *   least one buffer, t and p in (0, 3600], s in [0, 3600].
 *
 * Output
 *   stderr, UnixBench's lines, after each phase (so 3 pairs for -c; like
 *   UnixBench, whose Run keeps the last pair, the selected phase):
 *     COUNT|<score, truncated to an integer>|0|KBps
 *     TIME|<elapsed seconds, %.1f>
 *   stdout, one JSON line per phase, in order, nothing else:
 *     {"tool":"fstime","phase":"copy","bufsize":1024,"max_blocks":2000,
 *      "file_bytes":2048000,"bytes":123456789,"seconds":30.000123,
 *      "score_kibps":1234.567}
 *   The last line is the phase selected by the mode.
 *   Exit status: 0 ok, 1 runtime (I/O) error, 2 bad usage (unknown option,
 *   missing or non-numeric value), 3 value out of range or unusable
 *   directory, 128+N killed by signal N (files removed).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MIN_BUFSIZE     256
#define MAX_BUFSIZE     8192
#define MAX_MAX_BLOCKS  (1024L * 1024)      /* 1 GiB file at most */
#define MAX_SECONDS     3600.0
#define PRIME_SECONDS   2.0                 /* UnixBench's w_test(2), r_test(2): -p's default */

static const char usage_text[] =
    "usage: fstime [-c|-r|-w] [-t seconds] [-d dir] [-b bufsize] [-m max_blocks]\n"
    "              [-s settle_seconds] [-p prime_seconds]\n"
    "       fstime -h|--help\n"
    "  -c  copy test: write 2 s, read 2 s, then copy dummy0 -> dummy1 (default)\n"
    "  -r  read test: write 2 s, then read\n"
    "  -w  write test\n"
    "  -t  seconds of the measured phase, > 0 and <= 3600 (default 10)\n"
    "  -d  directory for the files dummy0-<pid>, dummy1-<pid> (default .)\n"
    "  -b  buffer size in bytes, 256..8192 (default 1024)\n"
    "  -m  file size in 1024-byte blocks, 1..1048576 (default 2000);\n"
    "      file = (max_blocks*1024/bufsize)*bufsize bytes\n"
    "  -s  settle sleep before each phase, 0..3600 s (default 2)\n"
    "  -p  seconds of each priming write/read before -r and -c's measured\n"
    "      phase, > 0 and <= 3600 (default 2, UnixBench's)\n"
    "Output: UnixBench COUNT|score|0|KBps and TIME|secs lines on stderr, one\n"
    "JSON line per phase on stdout.  Exit 0 ok, 1 I/O error, 2 usage, 3 range.\n";

/* The buffer is static, as in UnixBench (which found malloc'd buffers slower). */
static _Alignas(64) char buf[MAX_BUFSIZE];

static char path0[PATH_MAX];
static char path1[PATH_MAX];
static volatile sig_atomic_t files_armed;   /* paths valid, remove on exit */
static volatile sig_atomic_t deadline_hit;

static int fd0 = -1, fd1 = -1;
static long bufsize = 1024;
static long max_blocks = 2000;
static long long file_bytes;
static const char *bufsize_arg = "1024";      /* as given, for messages */
static const char *max_blocks_arg = "2000";

static void remove_files(void)
{
    if (files_armed) {
        unlink(path0);
        unlink(path1);
    }
}

static void on_fatal_signal(int sig)
{
    /* unlink and _exit are async-signal-safe */
    remove_files();
    _exit(128 + sig);
}

static void on_alarm(int sig)
{
    (void)sig;
    deadline_hit = 1;
}

static void usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fstime: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(usage_text, stderr);
    exit(2);
}

static void range_error(const char *msg)
{
    fprintf(stderr, "fstime: %s\n", msg);
    exit(3);
}

/* Runtime failure: remove the files, exit 1. */
static void io_fail(const char *what, const char *path)
{
    int e = errno;
    fprintf(stderr, "fstime: %s %s: %s\n", what, path, strerror(e));
    if (fd0 >= 0) close(fd0);
    if (fd1 >= 0) close(fd1);
    remove_files();
    exit(1);
}

static long parse_long(int opt, const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0') {
        usage_error("invalid number for -%c: '%s'", opt, s);
    }
    if (errno == ERANGE)
        v = (v < 0) ? LONG_MIN : LONG_MAX;  /* caught by the range checks */
    return v;
}

static double parse_double(int opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(v)) {
        usage_error("invalid number for -%c: '%s'", opt, s);
    }
    return v;
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_seconds(double s)
{
    if (s <= 0)
        return;
    struct timespec req, rem;
    req.tv_sec = (time_t)s;
    req.tv_nsec = (long)((s - (double)req.tv_sec) * 1e9);
    if (req.tv_nsec > 999999999L)
        req.tv_nsec = 999999999L;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

/* UnixBench: flush; sleep; flush; sleep (second sleep shorter for copy). */
static void settle(double s1, double s2)
{
    sync();
    sleep_seconds(s1);
    sync();
    sleep_seconds(s2);
}

static void arm_deadline(double secs)
{
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = (time_t)secs;
    it.it_value.tv_usec = (suseconds_t)((secs - (double)it.it_value.tv_sec) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    deadline_hit = 0;
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        io_fail("setitimer", "ITIMER_REAL");
}

static void disarm_deadline(void)
{
    struct itimerval it;
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
}

static void do_lseek0(int fd, const char *path)
{
    if (lseek(fd, 0, SEEK_SET) == (off_t)-1)
        io_fail("lseek", path);
}

/* Write all n bytes (completing short writes); return bytes written. */
static long long write_full(int fd, const char *path, long n)
{
    long done = 0;
    while (done < n) {
        ssize_t w = write(fd, buf + done, (size_t)(n - done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            io_fail("write", path);
        }
        if (w == 0) {
            errno = ENOSPC;
            io_fail("write", path);
        }
        done += (long)w;
    }
    return done;
}

static ssize_t read_once(int fd, const char *path)
{
    for (;;) {
        ssize_t r = read(fd, buf, (size_t)bufsize);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            io_fail("read", path);
    }
}

static void report(const char *phase, long long bytes, double secs)
{
    double score = (secs > 0) ? (double)bytes / 1024.0 / secs : 0.0;
    fprintf(stderr, "COUNT|%ld|0|KBps\n", (long)score);
    fprintf(stderr, "TIME|%.1f\n", secs);
    fflush(stderr);
    printf("{\"tool\":\"fstime\",\"phase\":\"%s\",\"bufsize\":%ld,"
           "\"max_blocks\":%ld,\"file_bytes\":%lld,\"bytes\":%lld,"
           "\"seconds\":%.6f,\"score_kibps\":%.3f}\n",
           phase, bufsize, max_blocks, file_bytes, bytes, secs, score);
    fflush(stdout);
}

static void write_phase(double secs, double settle_s)
{
    long buffs = (long)(file_bytes / bufsize);
    long long bytes = 0;

    settle(settle_s, settle_s);
    do_lseek0(fd0, path0);
    arm_deadline(secs);
    double start = now_mono();
    while (!deadline_hit) {
        for (long i = 0; i < buffs; i++)
            bytes += write_full(fd0, path0, bufsize);
        do_lseek0(fd0, path0);
    }
    double end = now_mono();
    disarm_deadline();
    report("write", bytes, end - start);
}

static void read_phase(double secs, double settle_s)
{
    long long bytes = 0;

    settle(settle_s, settle_s);
    do_lseek0(fd0, path0);
    arm_deadline(secs);
    double start = now_mono();
    while (!deadline_hit) {
        ssize_t r = read_once(fd0, path0);
        bytes += r;
        if (r != bufsize)           /* end of file: rewind */
            do_lseek0(fd0, path0);
    }
    double end = now_mono();
    disarm_deadline();
    report("read", bytes, end - start);
}

static void copy_phase(double secs, double settle_s)
{
    long long bytes = 0;

    settle(settle_s, settle_s / 2);
    do_lseek0(fd0, path0);
    do_lseek0(fd1, path1);
    arm_deadline(secs);
    double start = now_mono();
    while (!deadline_hit) {
        ssize_t r = read_once(fd0, path0);
        if (r != bufsize) {         /* end of dummy0: rewind both */
            do_lseek0(fd0, path0);
            do_lseek0(fd1, path1);
            continue;
        }
        bytes += write_full(fd1, path1, bufsize);
    }
    double end = now_mono();
    disarm_deadline();
    report("copy", bytes, end - start);
}

int main(int argc, char **argv)
{
    char mode = 'c';
    double seconds = 10.0;
    double settle_s = 2.0;
    double prime_s = PRIME_SECONDS;
    const char *dir = ".";
    char msg[PATH_MAX + 128];

    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };

    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":crwt:d:b:m:s:p:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': case 'r': case 'w':
            mode = (char)opt;
            break;
        case 't': seconds = parse_double(opt, optarg); break;
        case 's': settle_s = parse_double(opt, optarg); break;
        case 'p': prime_s = parse_double(opt, optarg); break;
        case 'b': bufsize = parse_long(opt, optarg); bufsize_arg = optarg; break;
        case 'm': max_blocks = parse_long(opt, optarg); max_blocks_arg = optarg; break;
        case 'd': dir = optarg; break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case ':':
            usage_error("option -%c requires a value", optopt);
        default:
            if (optopt)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);

    /* Range checks: exit 3. */
    if (bufsize < MIN_BUFSIZE || bufsize > MAX_BUFSIZE) {
        snprintf(msg, sizeof msg,
                 "bufsize %s out of range: must be %d..%d bytes (-b)",
                 bufsize_arg, MIN_BUFSIZE, MAX_BUFSIZE);
        range_error(msg);
    }
    if (max_blocks < 1 || max_blocks > MAX_MAX_BLOCKS) {
        snprintf(msg, sizeof msg,
                 "max_blocks %s out of range: must be 1..%ld 1024-byte blocks (-m)",
                 max_blocks_arg, MAX_MAX_BLOCKS);
        range_error(msg);
    }
    file_bytes = (long long)(max_blocks * 1024L / bufsize) * bufsize;
    if (file_bytes == 0) {
        snprintf(msg, sizeof msg,
                 "max_blocks %ld too small for bufsize %ld: file would hold no "
                 "full buffer (need max_blocks*1024 >= bufsize)",
                 max_blocks, bufsize);
        range_error(msg);
    }
    if (!(seconds > 0) || seconds > MAX_SECONDS) {
        snprintf(msg, sizeof msg,
                 "time %g out of range: must be > 0 and <= %.0f seconds (-t)",
                 seconds, MAX_SECONDS);
        range_error(msg);
    }
    if (!(settle_s >= 0) || settle_s > MAX_SECONDS) {
        snprintf(msg, sizeof msg,
                 "settle time %g out of range: must be 0..%.0f seconds (-s)",
                 settle_s, MAX_SECONDS);
        range_error(msg);
    }
    if (!(prime_s > 0) || prime_s > MAX_SECONDS) {
        snprintf(msg, sizeof msg,
                 "priming time %g out of range: must be > 0 and <= %.0f seconds (-p)",
                 prime_s, MAX_SECONDS);
        range_error(msg);
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(msg, sizeof msg, "directory '%s' (-d): %s", dir, strerror(errno));
        range_error(msg);
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(msg, sizeof msg, "directory '%s' (-d): not a directory", dir);
        range_error(msg);
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(msg, sizeof msg, "directory '%s' (-d): not writable: %s",
                 dir, strerror(errno));
        range_error(msg);
    }
    long pid = (long)getpid();
    int n0 = snprintf(path0, sizeof path0, "%s/dummy0-%ld", dir, pid);
    int n1 = snprintf(path1, sizeof path1, "%s/dummy1-%ld", dir, pid);
    if (n0 < 0 || n1 < 0 || (size_t)n0 >= sizeof path0 || (size_t)n1 >= sizeof path1) {
        snprintf(msg, sizeof msg, "directory path (-d) too long");
        range_error(msg);
    }

    /* Signals: remove the files on the way out.  Armed before creating. */
    files_armed = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_fatal_signal;
    const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaddset(&sa.sa_mask, fatal[i]);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);

    fd0 = open(path0, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd0 < 0)
        io_fail("create", path0);
    fd1 = open(path1, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd1 < 0)
        io_fail("create", path1);

    for (int i = 0; i < MAX_BUFSIZE; i++)
        buf[i] = (char)(i & 0xff);

    switch (mode) {
    case 'w':
        write_phase(seconds, settle_s);
        break;
    case 'r':
        write_phase(prime_s, settle_s);
        read_phase(seconds, settle_s);
        break;
    default:
        write_phase(prime_s, settle_s);
        read_phase(prime_s, settle_s);
        copy_phase(seconds, settle_s);
        break;
    }

    close(fd0);
    close(fd1);
    fd0 = fd1 = -1;
    remove_files();
    return 0;
}
