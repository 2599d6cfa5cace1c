/* The floor: a bare libcurl client that POSTs request bodies captured from
 * a real conversation, in order, on one reused connection, and does no JSON
 * work at all (no building, encoding or decoding of messages, no tools).
 * What any client must spend to move the same bytes over loopback HTTP.
 *
 *   bench_peers_floor URL BODIES KEY
 *
 * BODIES holds the bodies one after another, each as "LENGTH\n" followed by
 * LENGTH bytes. KEY is sent as X-Steps-Agent, which picks the mock script
 * that answers. Every answer must be HTTP 200; the last must hold the final
 * answer ("done"). Prints one JSON line: {"requests":N,"answer_ok":true}.
 * Exit status 0 only when every request succeeded. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buffer {
  char* data;
  size_t size;
  size_t cap;
};

static int reserve(struct buffer* b, size_t cap) {
  if (cap <= b->cap) return 1;
  size_t n = b->cap ? b->cap : 4096;
  while (n < cap) n *= 2;
  char* p = realloc(b->data, n);
  if (p == NULL) return 0;
  b->data = p;
  b->cap = n;
  return 1;
}

static size_t on_data(char* ptr, size_t size, size_t n, void* user) {
  struct buffer* b = user;
  size_t len = size * n;
  if (!reserve(b, b->size + len + 1)) return 0;
  memcpy(b->data + b->size, ptr, len);
  b->size += len;
  b->data[b->size] = '\0';
  return len;
}

/* Reads the next body into `body`; 0 at the end, -1 on a bad file. */
static int next_body(FILE* f, struct buffer* body) {
  unsigned long len = 0;
  int got = fscanf(f, "%lu", &len);
  if (got == EOF) return 0;
  if (got != 1 || fgetc(f) != '\n' || !reserve(body, len + 1)) return -1;
  if (fread(body->data, 1, len, f) != len) return -1;
  body->size = len;
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: bench_peers_floor URL BODIES KEY\n");
    return 64;
  }
  FILE* f = fopen(argv[2], "rb");
  if (f == NULL) {
    perror(argv[2]);
    return 66;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* easy = curl_easy_init();
  char agent_header[256];
  snprintf(agent_header, sizeof agent_header, "X-Steps-Agent: %s", argv[3]);
  struct curl_slist* headers = NULL;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Authorization: Bearer mock");
  headers = curl_slist_append(headers, "Expect:");
  headers = curl_slist_append(headers, agent_header);
  struct buffer body = {0}, answer = {0};
  curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);

  int requests = 0, failed = 0, got;
  while ((got = next_body(f, &body)) > 0) {
    answer.size = 0;
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.size);
    CURLcode rc = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    ++requests;
    if (rc != CURLE_OK || status != 200) {
      fprintf(stderr, "floor: request %d: %s, HTTP %ld\n", requests,
              curl_easy_strerror(rc), status);
      failed = 1;
      break;
    }
  }
  if (got < 0) {
    fprintf(stderr, "floor: %s: malformed after %d bodies\n", argv[2],
            requests);
    failed = 1;
  }
  /* A byte search, not a parse: the last answer is the final one. */
  int answer_ok = !failed && answer.size > 0 &&
                  strstr(answer.data, "\"content\":\"done\"") != NULL;
  printf("{\"requests\":%d,\"answer_ok\":%s}\n", requests,
         answer_ok ? "true" : "false");
  curl_slist_free_all(headers);
  curl_easy_cleanup(easy);
  curl_global_cleanup();
  fclose(f);
  free(body.data);
  free(answer.data);
  return failed || !answer_ok ? 1 : 0;
}
