/* Opens the dump written by consumer_cpp through the installed C ABI. Exit 0 on success. */
#include <stdio.h>

#include <driftscope.h>

int main(int argc, char** argv) {
  ds_reader* r = NULL;
  if (argc < 2) return 2;
  if (ds_reader_open(argv[1], NULL, &r) != 0) return 1;
  size_t n = ds_reader_record_count(r);
  ds_reader_free(r);
  printf("consumer_c ok: %s, %zu record\n", ds_version(), n);
  return n == 1 ? 0 : 1;
}
