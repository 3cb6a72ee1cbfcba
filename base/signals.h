// BlockTerminationSignals: the one way gantry's long-running binaries (gantry-server, the worker
// daemon) take SIGINT/SIGTERM: blocked in the calling thread before any other thread starts (so
// every thread inherits the mask) and then received synchronously with sigwait/sigtimedwait on the
// returned set.
#ifndef GANTRY_BASE_SIGNALS_H_
#define GANTRY_BASE_SIGNALS_H_

#include <pthread.h>
#include <signal.h>

namespace gantry {

inline sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace gantry

#endif  // GANTRY_BASE_SIGNALS_H_
