// PeerChannel: a communicator's second channel to each other daemon (peerproto::kP2p),
// next to the collective links: point-to-point messages between ranks, the
// reconfiguration agreement's control messages, abort notices and the goodbye of a
// communicator destroyed cleanly. One Link per peer host, each read by its own thread.
//
// A send holds its link's own lock, so the frames of two messages never interleave. The
// readers check every frame (peer_messages.h) before using it and hand what arrives to
// the communicator through Handler; memory for a message follows the bytes that arrive,
// not the length its header announces.
#ifndef CONDUIT_DAEMON_COLLECTIVES_PEER_CHANNEL_H_
#define CONDUIT_DAEMON_COLLECTIVES_PEER_CHANNEL_H_

#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/status.h"
#include "transport/link.h"

namespace conduit {

class PeerChannel {
 public:
  // What the readers hand the communicator, from their own threads.
  class Handler {
   public:
    // A point-to-point message from rank `src` for local rank `dst` of `bytes` bytes comes
    // next: room for it, before they are read. May wait, and the link's reading waits with
    // it; an error ends the link. `*into`, when set, is where the bytes go (a posted
    // receive's buffer): the reader writes them there and reports with OnP2pFilled.
    virtual Status ReserveP2p(int src, int dst, uint64_t bytes, uint8_t** into) = 0;
    // That message, read whole (into memory of the reader's own).
    virtual void OnP2pMessage(int src, int dst, std::vector<uint8_t> bytes) = 0;
    // While it is read into the reader's memory, between pieces (`arrived` bytes so far):
    // the buffer of a receive posted for it since (null: none). The reader copies what it
    // read there and reads the rest there, as with `*into`.
    virtual uint8_t* RetargetP2p(int src, int dst, uint64_t arrived) = 0;
    // That message, read into a receive's buffer whole, or cut off by the link's failure
    // (wherever it was read into): called before the reader reads anything else, unless
    // OnP2pMessage was.
    virtual void OnP2pFilled(int src, int dst, bool whole) = 0;
    // A reconfiguration message (peerproto::kReconfig*); an error ends the link.
    virtual Status OnControl(int host, uint16_t type, const std::vector<uint8_t>& payload) = 0;
    // The peer aborted the communicator; `why` is its reason.
    virtual void OnPeerAborted(const Status& why) = 0;
    // The link from `host` ended without a goodbye or a notice, or sent a bad frame.
    virtual void OnLinkFailed(int host, const Status& why) = 0;

   protected:
    ~Handler() = default;
  };

  // `timeout_ms`: how long the rest of a frame may take once its first byte came.
  PeerChannel(Handler* handler, int timeout_ms);
  ~PeerChannel();  // Close()

  // Once, before any link: the communicator's hosts (for checking where messages are from
  // and to).
  void Init(std::vector<int> host_of_rank, int my_host, int nhosts);
  // Installs the link with `host` and starts its reader. kDuplicate (and the link is
  // dropped) when there already is one; kNoReader when no thread can be started for the
  // reader (the link is installed, shut): the caller fails the communicator.
  enum class Attached { kOk, kDuplicate, kNoReader };
  Attached Attach(int host, std::unique_ptr<Link> link);

  // Sends to `host`, whose link must be attached.
  Status SendMessage(int host, int src, int dst, const void* data, size_t bytes, Deadline deadline);
  Status SendControl(int host, uint16_t type, const std::vector<uint8_t>& payload, Deadline deadline);
  // Best effort and bounded: the abort notice (with `why`) to every peer whose link is not
  // busy with a large send (its peer then learns of the abort from the closed links).
  void TellAborted(const Status& why);
  // Tells every peer this communicator is being destroyed cleanly, so that they do not
  // take the end of the link for a failure.
  void SayGoodbye();
  // Ends every link; the readers return.
  void Shutdown();
  // Shutdown and waits for the readers.
  void Close();

  // Live upgrade (docs/upgrade.md): stops every reader before its next frame (one in the
  // middle of a frame reads it to the end first), so what the peers send from then on waits
  // in the kernel for whichever process reads the sockets next. Ok once every reader has
  // stopped; after `deadline`, or for a link without a socket, an error and the channel
  // goes on.
  Status Pause(Deadline deadline);
  void Resume();
  // While paused: a duplicate of each link's socket, per host (invalid where none).
  Status DupSockets(std::vector<UniqueFd>* per_host) const;

  int nhosts() const;
  // The peers with a link: host and the link's peer name.
  std::vector<std::pair<int, std::string>> Peers() const;

 private:
  Link* LinkOf(int host) const;
  void ReaderLoop(int host, Link* link);
  // Reads the link from `host` until it ends; OK for a goodbye or an abort notice.
  Status Read(int host, Link* link);
  // Returns once the next frame's first byte can be read; stops on the way while paused.
  Status AwaitFrame(Link* link);

  Handler* const handler_;
  const int timeout_ms_;
  mutable std::mutex mu_;
  // Set by Init under mu_; read-only afterwards.
  std::vector<int> host_of_rank_;
  int my_host_ = 0;
  int nhosts_ = 0;
  std::vector<std::mutex> send_mu_;  // per host: one message's frames at a time

  std::vector<std::unique_ptr<Link>> links_;  // per host; null until attached
  std::vector<std::thread> readers_;
  bool closed_ = false;
  // The pause (under mu_): readers still reading, and those stopped.
  UniqueFd pause_wake_;  // an eventfd, readable while a pause is on
  std::condition_variable pause_cv_;
  bool pausing_ = false;
  int live_readers_ = 0;
  int paused_readers_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_PEER_CHANNEL_H_
