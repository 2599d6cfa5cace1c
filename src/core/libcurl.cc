#include "core/libcurl.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace steps::libcurl {
namespace {

constexpr char kLibrary[] = "libcurl.so.4";

struct Api {
  std::string error;  // Empty when every function below is set.
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_multi_init) multi_init = nullptr;
  decltype(&::curl_multi_cleanup) multi_cleanup = nullptr;
  decltype(&::curl_multi_setopt) multi_setopt = nullptr;
  decltype(&::curl_multi_add_handle) multi_add_handle = nullptr;
  decltype(&::curl_multi_remove_handle) multi_remove_handle = nullptr;
  decltype(&::curl_multi_assign) multi_assign = nullptr;
  decltype(&::curl_multi_socket_action) multi_socket_action = nullptr;
  decltype(&::curl_multi_perform) multi_perform = nullptr;
  decltype(&::curl_multi_poll) multi_poll = nullptr;
  decltype(&::curl_multi_info_read) multi_info_read = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
};

// Sets `fn` to the library's `name`; false (and `api.error`) if it lacks it.
template <typename Fn>
bool Bind(void* library, const char* name, Fn& fn, Api& api) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn != nullptr) return true;
  api.error = "the libcurl loaded has no " + std::string(name) +
              " (libcurl 7.66 or later is needed)";
  return false;
}

bool BindAll(void* l, Api& a) {
  return Bind(l, "curl_global_init", a.global_init, a) &&
         Bind(l, "curl_easy_init", a.easy_init, a) &&
         Bind(l, "curl_easy_cleanup", a.easy_cleanup, a) &&
         Bind(l, "curl_easy_setopt", a.easy_setopt, a) &&
         Bind(l, "curl_easy_getinfo", a.easy_getinfo, a) &&
         Bind(l, "curl_easy_strerror", a.easy_strerror, a) &&
         Bind(l, "curl_multi_init", a.multi_init, a) &&
         Bind(l, "curl_multi_cleanup", a.multi_cleanup, a) &&
         Bind(l, "curl_multi_setopt", a.multi_setopt, a) &&
         Bind(l, "curl_multi_add_handle", a.multi_add_handle, a) &&
         Bind(l, "curl_multi_remove_handle", a.multi_remove_handle, a) &&
         Bind(l, "curl_multi_assign", a.multi_assign, a) &&
         Bind(l, "curl_multi_socket_action", a.multi_socket_action, a) &&
         Bind(l, "curl_multi_perform", a.multi_perform, a) &&
         Bind(l, "curl_multi_poll", a.multi_poll, a) &&
         Bind(l, "curl_multi_info_read", a.multi_info_read, a) &&
         Bind(l, "curl_slist_append", a.slist_append, a) &&
         Bind(l, "curl_slist_free_all", a.slist_free_all, a);
}

// EMFILE or ENFILE when this process cannot open a descriptor now, else 0.
int ShortageNow() {
  const int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (probe >= 0) {
    close(probe);
    return 0;
  }
  return errno == EMFILE || errno == ENFILE ? errno : 0;
}

// Loads the library: the table, or null with `error` set, and `shortage`
// (EMFILE or ENFILE) when only a shortage of file descriptors stood in the
// way. dlopen leaves errno alone: the shortage is seen by trying to open a
// descriptor, or in the loader's message.
Api* Load(std::string& error, int& shortage) {
  const char* chosen = std::getenv("STEPS_LIBCURL");
  const bool named = chosen != nullptr && *chosen != '\0';
  const std::string name = named ? chosen : kLibrary;
  // Never closed: handles and callbacks may live until exit.
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* text = dlerror();
    const std::string why = text ? text : name;
    shortage = ShortageNow();
    if (shortage == 0 && why.find(std::strerror(EMFILE)) != std::string::npos) {
      shortage = why.find(std::strerror(ENFILE)) != std::string::npos ? ENFILE
                                                                      : EMFILE;
    }
    std::string way_out =
        shortage != 0 ? "the process is out of file descriptors"
        : named
            ? "STEPS_LIBCURL names it: unset it for " + std::string(kLibrary)
            : "install it (Debian: apt-get install libcurl4)";
    error = "libcurl could not be loaded (" + why + "); " + way_out;
    return nullptr;
  }
  Api* api = new Api();
  if (!BindAll(library, *api)) {
    if (named) api->error += "; STEPS_LIBCURL names it: is it libcurl?";
  } else if (CURLcode code = api->global_init(CURL_GLOBAL_DEFAULT);
             code != CURLE_OK) {
    api->error =
        std::string("libcurl could not start: ") + api->easy_strerror(code);
  }
  error = api->error;
  return api;
}

// The library once loaded, or once it failed for good.
std::atomic<const Api*> g_api{nullptr};
std::mutex g_load_mu;
// Why the last attempt on this thread failed for want of descriptors, and
// which shortage (EMFILE or ENFILE): such a failure is not kept, and the
// next call tries again.
thread_local std::string t_transient_error;
thread_local int t_shortage = 0;

// The table, loading the library if need be; null when it is not usable.
const Api* Usable() {
  const Api* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) {
    std::lock_guard<std::mutex> lock(g_load_mu);
    api = g_api.load(std::memory_order_relaxed);
    if (api == nullptr) {
      std::string error;
      int shortage = 0;
      Api* loaded = Load(error, shortage);
      t_shortage = shortage;
      if (loaded == nullptr && shortage != 0) {
        t_transient_error = error;
        return nullptr;
      }
      if (loaded == nullptr) {
        loaded = new Api();
        loaded->error = error;
      }
      g_api.store(loaded, std::memory_order_release);
      api = loaded;
    }
  }
  return api->error.empty() ? api : nullptr;
}

// For calls made with a handle, which only a loaded library gives.
const Api& Get() { return *g_api.load(std::memory_order_acquire); }

}  // namespace

bool Loaded() { return Usable() != nullptr; }

int DescriptorShortage() {
  return g_api.load(std::memory_order_acquire) ? 0 : t_shortage;
}

const std::string& Error() {
  const Api* api = g_api.load(std::memory_order_acquire);
  return api ? api->error : t_transient_error;
}

CURL* easy_init() {
  const Api* api = Usable();
  return api ? api->easy_init() : nullptr;
}

void easy_cleanup(CURL* easy) {
  if (easy != nullptr) Get().easy_cleanup(easy);
}

// libcurl reads an option's one value by the option's number range; the
// value is read here the same way and passed on unchanged.
CURLcode easy_setopt(CURL* easy, int option_number, ...) {
  const auto option = static_cast<CURLoption>(option_number);
  const Api* api = Usable();
  if (api == nullptr || easy == nullptr) return CURLE_FAILED_INIT;
  va_list args;
  va_start(args, option_number);
  CURLcode code;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    code = api->easy_setopt(easy, option, va_arg(args, long));
  } else if (option < CURLOPTTYPE_FUNCTIONPOINT) {
    code = api->easy_setopt(easy, option, va_arg(args, void*));
  } else if (option < CURLOPTTYPE_OFF_T) {
    code = api->easy_setopt(easy, option, va_arg(args, void (*)()));
  } else if (option < CURLOPTTYPE_BLOB) {
    code = api->easy_setopt(easy, option, va_arg(args, curl_off_t));
  } else {
    code = api->easy_setopt(easy, option, va_arg(args, void*));
  }
  va_end(args);
  return code;
}

CURLcode easy_getinfo(CURL* easy, CURLINFO info, void* out) {
  const Api* api = Usable();
  if (api == nullptr || easy == nullptr) return CURLE_FAILED_INIT;
  return api->easy_getinfo(easy, info, out);
}

const char* easy_strerror(CURLcode code) {
  const Api* api = Usable();
  return api ? api->easy_strerror(code) : "libcurl is not loaded";
}

CURLM* multi_init() {
  const Api* api = Usable();
  return api ? api->multi_init() : nullptr;
}

CURLMcode multi_cleanup(CURLM* multi) {
  if (multi == nullptr) return CURLM_BAD_HANDLE;
  return Get().multi_cleanup(multi);
}

CURLMcode multi_setopt(CURLM* multi, int option_number, ...) {
  const auto option = static_cast<CURLMoption>(option_number);
  const Api* api = Usable();
  if (api == nullptr || multi == nullptr) return CURLM_BAD_HANDLE;
  va_list args;
  va_start(args, option_number);
  CURLMcode code;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    code = api->multi_setopt(multi, option, va_arg(args, long));
  } else if (option < CURLOPTTYPE_FUNCTIONPOINT) {
    code = api->multi_setopt(multi, option, va_arg(args, void*));
  } else if (option < CURLOPTTYPE_OFF_T) {
    code = api->multi_setopt(multi, option, va_arg(args, void (*)()));
  } else {
    code = api->multi_setopt(multi, option, va_arg(args, curl_off_t));
  }
  va_end(args);
  return code;
}

CURLMcode multi_add_handle(CURLM* multi, CURL* easy) {
  return Get().multi_add_handle(multi, easy);
}
CURLMcode multi_remove_handle(CURLM* multi, CURL* easy) {
  return Get().multi_remove_handle(multi, easy);
}
CURLMcode multi_assign(CURLM* multi, curl_socket_t socket, void* data) {
  return Get().multi_assign(multi, socket, data);
}
CURLMcode multi_socket_action(CURLM* multi, curl_socket_t socket, int mask,
                              int* running) {
  return Get().multi_socket_action(multi, socket, mask, running);
}
CURLMcode multi_perform(CURLM* multi, int* running) {
  return Get().multi_perform(multi, running);
}
CURLMcode multi_poll(CURLM* multi, curl_waitfd* extra, unsigned int count,
                     int timeout_ms, int* ret) {
  return Get().multi_poll(multi, extra, count, timeout_ms, ret);
}
CURLMsg* multi_info_read(CURLM* multi, int* queued) {
  return Get().multi_info_read(multi, queued);
}

curl_slist* slist_append(curl_slist* list, const char* text) {
  const Api* api = Usable();
  return api ? api->slist_append(list, text) : nullptr;
}
void slist_free_all(curl_slist* list) {
  if (list != nullptr) Get().slist_free_all(list);
}

}  // namespace steps::libcurl
