// mkfiles DIR ROWS COLS SIZE THREADS MODE: create DIR/c/ROW/COL files (O_CREAT|O_EXCL, SIZE bytes).
// MODE same: the threads share each row directory (file k of a row to thread k % T);
// MODE split: thread t writes the rows r with r % T == t.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/stat.h>
static const char *dir; static int rows, cols, size, T, split; static char *buf;
static void *work(void *arg) {
  long t = (long)arg; char p[4096];
  for (int r = 0; r < rows; r++) {
    if (split && r % T != t) continue;
    for (int c = 0; c < cols; c++) {
      if (!split && c % T != t) continue;
      snprintf(p, sizeof p, "%s/c/%d/%d", dir, r, c);
      int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (fd < 0) { perror(p); exit(1); }
      if (write(fd, buf, size) != size) { perror("write"); exit(1); }
      close(fd);
    }
  }
  return 0;
}
int main(int argc, char **argv) {
  dir = argv[1]; rows = atoi(argv[2]); cols = atoi(argv[3]); size = atoi(argv[4]); T = atoi(argv[5]);
  split = strcmp(argv[6], "split") == 0;
  buf = malloc(size); memset(buf, 7, size);
  char p[4096]; mkdir(dir, 0755); snprintf(p, sizeof p, "%s/c", dir); mkdir(p, 0755);
  for (int r = 0; r < rows; r++) { snprintf(p, sizeof p, "%s/c/%d", dir, r); mkdir(p, 0755); }
  pthread_t th[16];
  for (long t = 0; t < T; t++) pthread_create(&th[t], 0, work, (void *)t);
  for (int t = 0; t < T; t++) pthread_join(th[t], 0);
  return 0;
}
