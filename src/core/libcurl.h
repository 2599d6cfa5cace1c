// libcurl, loaded when the first transfer needs it. `steps` does not link
// libcurl: loading it and the thirty libraries it links (TLS, Kerberos,
// LDAP, ...) costs a process about 12 ms of CPU, and most runs of `steps`
// (validate, explain, show, a pipeline of tasks, a mock run) never make an
// HTTP request. The first call of any function here loads libcurl.so.4 (or
// the library the environment variable STEPS_LIBCURL names, a file name or
// path) and runs curl_global_init once; if it cannot be loaded, easy_init
// and multi_init return null and Error() says why. A failure for want of
// file descriptors is not kept: the next call tries again.
//
// The functions mirror libcurl's own (curl_easy_init is libcurl::easy_init)
// and take the same arguments.
#ifndef STEPS_CORE_LIBCURL_H_
#define STEPS_CORE_LIBCURL_H_

#include <curl/curl.h>

#include <string>

namespace steps::libcurl {

// Whether libcurl is loaded, loading it if it is not yet.
bool Loaded();
// Why it could not be loaded ("" when it is), as the last call on this
// thread found.
const std::string& Error();
// EMFILE or ENFILE when the last call on this thread could not load it for
// want of file descriptors (a failure that is not kept); else 0.
int DescriptorShortage();

CURL* easy_init();
void easy_cleanup(CURL* easy);
// One value of the option's type: long, a pointer, a function or a
// curl_off_t, as libcurl's option ranges say. The option is passed as an
// int (a CURLoption converts to it): an enumeration before `...` undergoes
// promotion, which va_start does not allow.
CURLcode easy_setopt(CURL* easy, int option, ...);
CURLcode easy_getinfo(CURL* easy, CURLINFO info, void* out);
const char* easy_strerror(CURLcode code);

CURLM* multi_init();
CURLMcode multi_cleanup(CURLM* multi);
CURLMcode multi_setopt(CURLM* multi, int option, ...);  // as easy_setopt
CURLMcode multi_add_handle(CURLM* multi, CURL* easy);
CURLMcode multi_remove_handle(CURLM* multi, CURL* easy);
CURLMcode multi_assign(CURLM* multi, curl_socket_t socket, void* data);
CURLMcode multi_socket_action(CURLM* multi, curl_socket_t socket, int mask,
                              int* running);
CURLMcode multi_perform(CURLM* multi, int* running);
CURLMcode multi_poll(CURLM* multi, curl_waitfd* extra, unsigned int count,
                     int timeout_ms, int* ret);
CURLMsg* multi_info_read(CURLM* multi, int* queued);

curl_slist* slist_append(curl_slist* list, const char* text);
void slist_free_all(curl_slist* list);

}  // namespace steps::libcurl

#endif  // STEPS_CORE_LIBCURL_H_
