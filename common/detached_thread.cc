#include "common/detached_thread.h"

#include <pthread.h>

#include <system_error>

namespace conduit {

void SpawnDetachedThread(void* (*entry)(void*), void* arg) {
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_attr_init");
  rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  if (rc == 0) rc = pthread_create(&thread, &attr, entry, arg);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "cannot create a thread");
}

}  // namespace conduit
