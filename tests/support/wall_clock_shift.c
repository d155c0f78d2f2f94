/*
 * Shifts a process's wall clock, and only its wall clock, as an NTP step or
 * `date -s` would shift it, without touching the machine's.
 *
 * Loaded with LD_PRELOAD; WALL_CLOCK_SHIFT_FILE names a file holding the shift
 * in milliseconds (signed decimal; absent or empty: none). clock_gettime for
 * CLOCK_REALTIME (and its coarse variant), gettimeofday and time return the
 * real time plus the shift; every other clock (CLOCK_MONOTONIC, which Python's
 * time.monotonic, time.sleep and asyncio's loop run on) is left alone.
 *
 * The file is read again at most every READ_INTERVAL_NS of monotonic time, so
 * a test steps the clock by rewriting it (write a new file, then rename it
 * over the old one, so that a read never sees half a number).
 *
 * Build: cc -shared -fPIC -O2 -o libwallclockshift.so wall_clock_shift.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define READ_INTERVAL_NS 10000000LL /* 10 ms */

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static int64_t shift_ns;
static int64_t read_at_ns = INT64_MIN;

static clock_gettime_fn real(void) {
    clock_gettime_fn fn = __atomic_load_n(&real_clock_gettime, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        __atomic_store_n(&real_clock_gettime, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

static int64_t read_shift_ns(void) {
    const char *path = getenv("WALL_CLOCK_SHIFT_FILE");
    if (path == NULL) {
        return 0;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    text[n] = '\0';
    return strtoll(text, NULL, 10) * 1000000LL;
}

/* The shift now: re-read once READ_INTERVAL_NS has passed since the last read. */
static int64_t current_shift_ns(void) {
    struct timespec now;
    if (real()(CLOCK_MONOTONIC, &now) != 0) {
        return __atomic_load_n(&shift_ns, __ATOMIC_RELAXED);
    }
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    int64_t last = __atomic_load_n(&read_at_ns, __ATOMIC_RELAXED);
    if (last == INT64_MIN || now_ns - last >= READ_INTERVAL_NS) {
        __atomic_store_n(&shift_ns, read_shift_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&read_at_ns, now_ns, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&shift_ns, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts) {
    int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_shift_ns();
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000L;
        ts->tv_sec -= 1;
    }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = real()(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        shift(ts);
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
