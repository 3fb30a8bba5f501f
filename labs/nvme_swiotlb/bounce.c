/*
 * bounce.c -- what one extra copy per I/O costs: a model of swiotlb bouncing.
 *
 * What it models
 *   When a device cannot reach a buffer by DMA (the buffer lies outside the
 *   device's DMA window: its dma_mask, or the dma-ranges of the PCIe host
 *   bridge in the device tree), the kernel's swiotlb ("software I/O TLB")
 *   lets the device DMA into a bounce buffer it *can* reach, and on
 *   completion copies the data from the bounce buffer into the real buffer
 *   (swiotlb_tbl_unmap_single -> swiotlb_bounce -> memcpy, on the completion
 *   path).  So every read pays one extra memcpy of its whole length.
 *
 *   This program reads a file with O_DIRECT (the data comes from the device,
 *   not from the page cache) into buffer A.  In "direct" mode that is all.
 *   In "bounce" mode it then copies each block from A into buffer B before
 *   the block counts as done, as swiotlb copies from its pool into the
 *   caller's buffer.  Comparing the two modes for block sizes from 4 KiB to
 *   1 MiB shows when the copy matters: it costs about block/memcpy_bandwidth
 *   per I/O, so it is noise next to a slow device and a large share of the
 *   time when the device (or a tmpfs file, which is memory) delivers data at
 *   a speed comparable to memcpy -- there one copy can halve the throughput.
 *   The model copies in user space; the kernel copies in the completion path,
 *   but the memory traffic is the same.
 *
 * Method
 *   For each block size and each sample, the file is read sequentially with
 *   pread() at increasing offsets (wrapping to offset 0 at the end of the
 *   last whole block) until the sample has lasted at least -t seconds; the
 *   sample is bytes / elapsed in MB/s (10^6 bytes per second, as dd prints).
 *   Before the samples of a block size, 8 untimed reads warm up the buffers.
 *   The modes alternate within each sample index (direct, bounce, direct,
 *   ...) so that drift in the device's speed hits both alike.  In bounce
 *   mode the time spent in memcpy is also measured (CLOCK_MONOTONIC around
 *   each copy) and reported per I/O.  Buffers are aligned to 4096 bytes, as
 *   O_DIRECT requires on common devices.  The median of the samples is
 *   reported (mean of the middle two for an even count); every sample is
 *   printed.
 *
 * Usage
 *   bounce -f FILE [-b SIZES] [-m MODES] [-n SAMPLES] [-t SECONDS]
 *     -f FILE     file to read with O_DIRECT; at least as large as the
 *                 largest block
 *     -b SIZES    comma-separated block sizes, bytes with optional k or m
 *                 suffix, each a multiple of 4096 (default 4k,16k,64k,256k,1m)
 *     -m MODES    direct, bounce or direct,bounce (default direct,bounce)
 *     -n SAMPLES  samples per block size and mode, 1..1000 (default 5)
 *     -t SECONDS  minimum duration of one sample, 0.001..60 (default 0.2)
 *
 * Output
 *   stdout, one JSON line per (block, mode):
 *     {"tool":"bounce","file":"F","block":B,"mode":"direct|bounce",
 *      "unit":"MB/s","samples":[...],"median":M,"min":A,"max":Z,
 *      "ios":[ios per sample],"copy_ns_per_io":[per sample, bounce only]}
 *   stderr, one human-readable line per (block, mode).
 *   Exit status: 0 ok, 1 runtime error (no number printed for the failing
 *   case), 2 bad usage.
 *
 * Portable C11 + POSIX; no architecture-specific code (builds on x86_64 and
 * aarch64 alike).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_BLOCKS 32
#define ALIGN 4096
#define WARMUP_IOS 8

static const char *prog = "bounce";

static void usage(FILE *to)
{
    fprintf(to,
            "usage: bounce -f FILE [-b SIZES] [-m MODES] [-n SAMPLES] [-t SECONDS]\n"
            "  -f FILE     file to read with O_DIRECT\n"
            "  -b SIZES    block sizes, e.g. 4k,64k,1m (multiples of 4096; default 4k,16k,64k,256k,1m)\n"
            "  -m MODES    direct, bounce or direct,bounce (default direct,bounce)\n"
            "  -n SAMPLES  samples per block size and mode (default 5)\n"
            "  -t SECONDS  minimum duration of one sample (default 0.2)\n");
}

static void bad_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\n", prog, msg, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Parse "4096", "4k", "1m" (binary multiples). Returns 0 on error. */
static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return 0;
    if (*end == 'k' || *end == 'K') {
        v *= 1024ULL;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        v *= 1024ULL * 1024ULL;
        end++;
    }
    if (*end != '\0' || v == 0 || v > (64ULL << 20))
        return 0;
    return (size_t)v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double *s = malloc(sizeof(double) * (size_t)n);
    if (!s) {
        perror("bounce: malloc");
        exit(1);
    }
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
    free(s);
    return m;
}

/* Keep the compiler from dropping a copy whose destination is never read:
 * an empty asm that "uses" the pointer and clobbers memory (GCC/Clang, any
 * architecture). */
static inline void escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

struct sample {
    double mbps;
    long ios;
    double copy_ns_per_io;
};

/* One sample: read blocks of `block` bytes from fd until `secs` elapsed. */
static int run_sample(int fd, size_t block, off_t usable, int bounce, double secs,
                      unsigned char *a, unsigned char *b, off_t *pos, struct sample *out)
{
    long ios = 0;
    int64_t copy_ns = 0;
    double bytes = 0;
    double t0 = now_s(), t1;
    do {
        if (*pos + (off_t)block > usable)
            *pos = 0;
        ssize_t got = pread(fd, a, block, *pos);
        if (got < 0) {
            fprintf(stderr, "%s: pread(%zu bytes at %lld): %s\n", prog, block, (long long)*pos,
                    strerror(errno));
            return -1;
        }
        if ((size_t)got != block) {
            fprintf(stderr, "%s: short read: %zd of %zu bytes at %lld\n", prog, got, block,
                    (long long)*pos);
            return -1;
        }
        if (bounce) {
            int64_t c0 = now_ns();
            memcpy(b, a, block);
            escape(b);
            copy_ns += now_ns() - c0;
        }
        escape(a);
        *pos += (off_t)block;
        bytes += (double)block;
        ios++;
        t1 = now_s();
    } while (t1 - t0 < secs);
    out->mbps = bytes / (t1 - t0) / 1e6;
    out->ios = ios;
    out->copy_ns_per_io = bounce ? (double)copy_ns / (double)ios : 0.0;
    return 0;
}

static void print_json(const char *file, size_t block, const char *mode, const struct sample *s, int n)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v) {
        perror("bounce: malloc");
        exit(1);
    }
    double lo = s[0].mbps, hi = s[0].mbps;
    for (int i = 0; i < n; i++) {
        v[i] = s[i].mbps;
        if (v[i] < lo)
            lo = v[i];
        if (v[i] > hi)
            hi = v[i];
    }
    double med = median(v, n);
    printf("{\"tool\":\"bounce\",\"file\":\"");
    for (const char *p = file; *p; p++) {
        if (*p == '"' || *p == '\\')
            putchar('\\');
        if ((unsigned char)*p >= 0x20)
            putchar(*p);
    }
    printf("\",\"block\":%zu,\"mode\":\"%s\",\"unit\":\"MB/s\",\"samples\":[", block, mode);
    for (int i = 0; i < n; i++)
        printf("%s%.3f", i ? "," : "", s[i].mbps);
    printf("],\"median\":%.3f,\"min\":%.3f,\"max\":%.3f,\"ios\":[", med, lo, hi);
    for (int i = 0; i < n; i++)
        printf("%s%ld", i ? "," : "", s[i].ios);
    printf("]");
    if (strcmp(mode, "bounce") == 0) {
        printf(",\"copy_ns_per_io\":[");
        for (int i = 0; i < n; i++)
            printf("%s%.1f", i ? "," : "", s[i].copy_ns_per_io);
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "bounce: block %zu B, %s: median %.1f MB/s (min %.1f, max %.1f, %d samples)\n",
            block, mode, med, lo, hi, n);
    free(v);
}

int main(int argc, char **argv)
{
    const char *file = NULL;
    const char *sizes = "4k,16k,64k,256k,1m";
    int want_direct = 1, want_bounce = 1;
    int nsamples = 5;
    double secs = 0.2;
    int opt;

    if (argc == 2 && strcmp(argv[1], "--help") == 0) {   /* the long form every lab program takes */
        usage(stdout);
        return 0;
    }
    while ((opt = getopt(argc, argv, "f:b:m:n:t:h")) != -1) {
        switch (opt) {
        case 'f':
            file = optarg;
            break;
        case 'b':
            sizes = optarg;
            break;
        case 'm':
            if (strcmp(optarg, "direct") == 0) {
                want_direct = 1;
                want_bounce = 0;
            } else if (strcmp(optarg, "bounce") == 0) {
                want_direct = 0;
                want_bounce = 1;
            } else if (strcmp(optarg, "direct,bounce") == 0 || strcmp(optarg, "bounce,direct") == 0) {
                want_direct = want_bounce = 1;
            } else {
                bad_usage("-m must be direct, bounce or direct,bounce", optarg);
            }
            break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 1 || v > 1000)
                bad_usage("-n must be an integer from 1 to 1000", optarg);
            nsamples = (int)v;
            break;
        }
        case 't': {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || end == optarg || !(v >= 0.001 && v <= 60))
                bad_usage("-t must be a number of seconds from 0.001 to 60", optarg);
            secs = v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc)
        bad_usage("unexpected argument", argv[optind]);
    if (!file)
        bad_usage("-f FILE is required", NULL);

    size_t blocks[MAX_BLOCKS];
    int nblocks = 0;
    size_t maxblock = 0;
    {
        char *copy = strdup(sizes);
        if (!copy) {
            perror("bounce: strdup");
            return 1;
        }
        for (char *tok = copy, *comma; tok; tok = comma ? comma + 1 : NULL) {
            comma = strchr(tok, ',');
            if (comma)
                *comma = '\0';
            size_t v = parse_size(tok);
            if (v == 0 || v % ALIGN != 0)
                bad_usage("block sizes must be multiples of 4096 bytes, at most 64m", tok);
            if (nblocks == MAX_BLOCKS)
                bad_usage("too many block sizes", sizes);
            blocks[nblocks++] = v;
            if (v > maxblock)
                maxblock = v;
        }
        free(copy);
        if (nblocks == 0)
            bad_usage("no block size given", sizes);
    }

    int fd = open(file, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        fprintf(stderr, "%s: open %s with O_DIRECT: %s%s\n", prog, file, strerror(errno),
                errno == EINVAL ? " (this filesystem does not support O_DIRECT)" : "");
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: fstat %s: %s\n", prog, file, strerror(errno));
        return 1;
    }
    off_t size = st.st_size;
    if (S_ISBLK(st.st_mode)) {
        off_t end = lseek(fd, 0, SEEK_END);
        if (end > 0)
            size = end;
    }
    if (size < (off_t)maxblock) {
        fprintf(stderr, "%s: %s has %lld bytes, less than the largest block (%zu)\n", prog, file,
                (long long)size, maxblock);
        return 1;
    }

    unsigned char *a = NULL, *b = NULL;
    if (posix_memalign((void **)&a, ALIGN, maxblock) != 0 || posix_memalign((void **)&b, ALIGN, maxblock) != 0) {
        fprintf(stderr, "%s: cannot allocate two %zu-byte buffers\n", prog, maxblock);
        return 1;
    }
    /* Touch both buffers so page faults are not part of the first sample. */
    memset(a, 0, maxblock);
    memset(b, 0, maxblock);

    struct sample *sd = calloc((size_t)nsamples, sizeof *sd);
    struct sample *sb = calloc((size_t)nsamples, sizeof *sb);
    if (!sd || !sb) {
        perror("bounce: calloc");
        return 1;
    }

    for (int k = 0; k < nblocks; k++) {
        size_t block = blocks[k];
        off_t usable = size / (off_t)block * (off_t)block;
        off_t pos = 0;
        for (int i = 0; i < WARMUP_IOS; i++) {
            if (pos + (off_t)block > usable)
                pos = 0;
            ssize_t got = pread(fd, a, block, pos);
            if (got != (ssize_t)block) {
                fprintf(stderr, "%s: warm-up read of %zu bytes at %lld: %s\n", prog, block, (long long)pos,
                        got < 0 ? strerror(errno) : "short read");
                return 1;
            }
            memcpy(b, a, block);
            escape(b);
            pos += (off_t)block;
        }
        for (int i = 0; i < nsamples; i++) {
            /* Alternate which mode goes first, so neither always follows the other. */
            for (int j = 0; j < 2; j++) {
                int bounce = (i + j) % 2;
                if (bounce && !want_bounce)
                    continue;
                if (!bounce && !want_direct)
                    continue;
                struct sample *dst = bounce ? &sb[i] : &sd[i];
                if (run_sample(fd, block, usable, bounce, secs, a, b, &pos, dst) != 0)
                    return 1;
            }
        }
        if (want_direct)
            print_json(file, block, "direct", sd, nsamples);
        if (want_bounce)
            print_json(file, block, "bounce", sb, nsamples);
    }
    free(sd);
    free(sb);
    free(a);
    free(b);
    close(fd);
    return 0;
}
