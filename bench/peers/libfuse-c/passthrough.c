/* The FUSE floor of bench/run httpfs: a passthrough of one flat directory on libfuse3's own
 * single-threaded low-level loop (blocking reads of /dev/fuse, pread(2) and the reply in the
 * same thread), with direct_io as gluon's fuse-passthrough. Only what fio needs: lookup,
 * getattr, open, read, release, flush, and readdir of the root.
 *
 *   passthrough DIR MOUNTPOINT      (prints "mounted", unmounts on SIGINT/SIGTERM)
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int root_fd;
static double timeout = 1.0;

/* Inodes are the files' own: the directory is flat, so a lookup's name is found again by
 * scanning for the inode (the few files fio uses). */
static int name_of(fuse_ino_t ino, char* out, size_t n) {
    DIR* d = fdopendir(dup(root_fd));
    if (!d) return -1;
    rewinddir(d);
    struct dirent* e;
    int found = -1;
    while ((e = readdir(d))) {
        struct stat st;
        if (fstatat(root_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == ino) {
            snprintf(out, n, "%s", e->d_name);
            found = 0;
            break;
        }
    }
    closedir(d);
    return found;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    if (parent != FUSE_ROOT_ID) return (void)fuse_reply_err(req, ENOENT);
    if (fstatat(root_fd, name, &e.attr, AT_SYMLINK_NOFOLLOW) != 0) return (void)fuse_reply_err(req, errno);
    e.ino = e.attr.st_ino;
    e.attr_timeout = e.entry_timeout = timeout;
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    struct stat st;
    if (fi) {
        if (fstat((int)fi->fh, &st) != 0) return (void)fuse_reply_err(req, errno);
    } else if (ino == FUSE_ROOT_ID) {
        if (fstat(root_fd, &st) != 0) return (void)fuse_reply_err(req, errno);
        st.st_ino = FUSE_ROOT_ID;
    } else {
        char name[256];
        if (name_of(ino, name, sizeof name) != 0) return (void)fuse_reply_err(req, ENOENT);
        if (fstatat(root_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return (void)fuse_reply_err(req, errno);
    }
    fuse_reply_attr(req, &st, timeout);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    char name[256];
    if (name_of(ino, name, sizeof name) != 0) return (void)fuse_reply_err(req, ENOENT);
    int fd = openat(root_fd, name, fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY));
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    fi->fh = (uint64_t)fd;
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
    (void)ino;
    static char* buf;
    static size_t cap;
    if (size > cap) {
        free(buf);
        buf = malloc(size);
        cap = buf ? size : 0;
        if (!buf) return (void)fuse_reply_err(req, ENOMEM);
    }
    ssize_t n = pread((int)fi->fh, buf, size, off);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_buf(req, buf, (size_t)n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    (void)ino;
    close((int)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
    (void)fi;
    if (ino != FUSE_ROOT_ID) return (void)fuse_reply_err(req, ENOTDIR);
    char* buf = calloc(1, size);
    DIR* d = fdopendir(dup(root_fd));
    if (!buf || !d) return (void)fuse_reply_err(req, ENOMEM);
    rewinddir(d);
    size_t used = 0;
    off_t i = 0;
    struct dirent* e;
    while ((e = readdir(d))) {
        if (i++ < off) continue;
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = e->d_ino;
        st.st_mode = (mode_t)e->d_type << 12;
        size_t n = fuse_add_direntry(req, buf + used, size - used, e->d_name, &st, i);
        if (used + n > size) break;
        used += n;
    }
    closedir(d);
    fuse_reply_buf(req, buf, used);
    free(buf);
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: passthrough DIR MOUNTPOINT\n");
        return 2;
    }
    root_fd = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (root_fd < 0) {
        perror(argv[1]);
        return 1;
    }
    struct fuse_lowlevel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.lookup = op_lookup;
    ops.getattr = op_getattr;
    ops.open = op_open;
    ops.read = op_read;
    ops.release = op_release;
    ops.flush = op_flush;
    ops.readdir = op_readdir;
    char* args_v[] = {argv[0], "-o", "fsname=libfuse-passthrough,default_permissions", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, args_v);
    struct fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[2]) != 0) return 1;
    printf("mounted\n");
    fflush(stdout);
    int r = fuse_session_loop(se);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return r < 0 ? 1 : 0;
}
