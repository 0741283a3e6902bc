// Replays SMPI time-independent traces on SimGrid's S4U, matching messages in a table of its own.
//
// SMPI matches a message by scanning its receiver's one mailbox for the source and tag; with about
// a million messages in flight (linear at 1,024 ranks) that scan is most of the replay. Here the
// k-th send from s to d meets the k-th receive at d from s in a table, and the transfer is a
// host-to-host comm started when the second side posts, as SMPI starts a mailbox comm then. Every
// post is one simcall, as in SMPI, so the ranks post in SMPI's turns: SimGrid's sharing with cross
// traffic can depend on the order in which simultaneous flows start. The rest is what SMPI does for
// point-to-point calls (SimGrid 4.1, smpi_request.cpp): an envelope of 16 bytes on every message; a
// send below the detach threshold (64 KiB) is detached, so the sender goes on at once and its wait is
// free; ois is slept before every isend, os before a detached send, or after each receive of a
// detached message; network/model:SMPI at precision 1e-9.
//
// Usage: s4u_replay PLATFORM HOSTFILE LISTING [--scale=F] [--cfg=smpi/os:S] [--cfg=smpi/ois:S] [--cfg=smpi/or:S]
// [--cfg=...] prints "Simulation time T" (seconds, when the last rank finishes). --scale=F multiplies every
// message's bytes and every compute amount (rounded to a whole flop, as the traces of that size would say), so
// one trace serves every size of a schedule. Collective lines (SMPI's own MPI_Alltoall) are refused: only
// smpirun replays those.
#include <simgrid/s4u.hpp>
#include <simgrid/version.h>
#if SIMGRID_VERSION_MAJOR >= 4
#include <simgrid/simcall.hpp>
#else  // Debian's 3.32
#include <simgrid/simix.hpp>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr double DETACH_BELOW = 65536;  // SMPI's smpi/send-is-detached-thresh
constexpr double ENVELOPE = 16;         // bytes SMPI adds to every message (tag, source, communicator)

enum class Kind : std::uint8_t { isend, irecv, send, recv, wait, compute };

struct Action {
  Kind kind;
  int peer;     // the other rank (wait: the source, or the destination when we sent)
  int tag;
  double bytes;  // message bytes, or flops for compute
  bool sent;    // wait: whether the request waited for is our send
};

struct Costs {
  double os = 0, ois = 0, orecv = 0;  // seconds, as smpi/os, smpi/ois and smpi/or
};

struct Options {
  Costs costs;
  double scale = 1;  // the traces' bytes and compute amounts are multiplied by it
};

[[noreturn]] void fail(const std::string& what)
{
  std::fprintf(stderr, "s4u_replay: %s\n", what.c_str());
  std::exit(2);
}

// The first words of one trace line, split at spaces, and how many it has.
struct Words {
  std::array<std::string_view, 7> at;
  size_t size = 0;
};

Words words_of(std::string_view line)
{
  Words words;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  for (size_t at = 0; at < line.size();) {
    if (blank(line[at])) {
      at++;
      continue;
    }
    size_t end = at;
    while (end < line.size() && !blank(line[end]))
      end++;
    if (words.size < words.at.size())
      words.at[words.size] = line.substr(at, end - at);
    words.size++;
    at = end;
  }
  return words;
}

template <typename Number> bool parse(std::string_view word, Number& value)
{
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  return error == std::errc() && end == word.data() + word.size();
}

// One line's action; false when it names none (init, finalize, a blank line), fails when it cannot be read. Parsed by
// hand: an istringstream per line made reading millions of lines a large part of the replay.
bool read_action(std::string_view line, int rank, double scale, const std::string& path, Action& a)
{
  auto words = words_of(line);
  int who;
  if (words.size == 0)  // a blank line
    return false;
  if (words.size < 2 || !parse(words.at[0], who))
    fail(path + ": cannot read '" + std::string(line) + "'");
  if (who != rank)
    fail(path + ": a line of rank " + std::to_string(who) + " in the trace of rank " + std::to_string(rank));
  std::string_view verb = words.at[1];
  bool read;
  if (verb == "isend" || verb == "irecv" || verb == "send" || verb == "recv") {
    a.kind = verb == "isend" ? Kind::isend : verb == "irecv" ? Kind::irecv : verb == "send" ? Kind::send : Kind::recv;
    double count;
    read = (words.size == 5 || words.size == 6) && parse(words.at[2], a.peer) && parse(words.at[3], a.tag) &&
           parse(words.at[4], count);
    if (words.size == 6 && words.at[5] != "0")  // SMPI's traces: no datatype is MPI_BYTE, 0 is MPI_DOUBLE
      fail(path + ": datatype " + std::string(words.at[5]) + " is not replayed (MPI_BYTE or 0, MPI_DOUBLE)");
    a.bytes = count * (words.size == 6 ? 8 : 1) * scale;
  } else if (verb == "wait") {
    int src, dst;
    read = words.size == 5 && parse(words.at[2], src) && parse(words.at[3], dst) && parse(words.at[4], a.tag);
    a.kind = Kind::wait;
    a.sent = src == rank;
    a.peer = a.sent ? dst : src;
  } else if (verb == "compute") {
    a.kind = Kind::compute;
    read = words.size == 3 && parse(words.at[2], a.bytes);
    a.bytes = std::nearbyint(a.bytes * scale);
  } else if (verb == "init" || verb == "finalize") {
    return false;
  } else {
    fail(path + ": '" + std::string(verb) +
         "' is not replayed here (point-to-point and compute only; smpirun replays collectives)");
  }
  if (!read)
    fail(path + ": cannot read '" + std::string(line) + "'");
  return true;
}

std::vector<Action> read_trace(const std::string& path, int rank, double scale)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string text(in ? static_cast<size_t>(in.tellg()) : 0, '\0');
  if (!in || !in.seekg(0) || !in.read(text.data(), static_cast<std::streamsize>(text.size())))
    fail("cannot read " + path);
  std::vector<Action> actions;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    Action a{};
    if (read_action(line, rank, scale, path, a))
      actions.push_back(a);
  }
  return actions;
}

std::uint64_t request_key(int peer, int tag, bool sent)
{
  return (static_cast<std::uint64_t>(peer) << 33) | (static_cast<std::uint64_t>(tag) << 1) | (sent ? 1 : 0);
}

// One message: the k-th send from s to d meets the k-th receive at d from s. Its transfer is a host-to-host comm,
// started when the second side posts, as SMPI's mailbox comm is matched and started then. No mailbox is made:
// at a million messages in flight, a mailbox per pair was a third of the memory.
struct Message {
  sg4::CommPtr comm;              // the transfer, once both sides have posted
  sg4::SemaphorePtr started;      // made by a side that waits before then; released at the start
  double bytes = 0;               // the sender's, once it has posted
  std::shared_ptr<Message> next;  // the next one posted on the same side of the same pair, not yet met
};
using MessagePtr = std::shared_ptr<Message>;

struct Pending {  // a request this rank will wait for
  MessagePtr message;
  double bytes;
  bool recv;
};

// The messages posted on one side only, per pair of ranks, oldest first.
class Matcher {
public:
  explicit Matcher(std::vector<sg4::Host*> hosts) : hosts_(std::move(hosts)) {}

  // The message of one more send (put) or receive between src and dst: the oldest one the other side posted, now
  // started, or a new one that waits for it.
  MessagePtr post(int src, int dst, bool put, double bytes)
  {
    auto key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
    auto at = unmet_.find(key);
    if (at == unmet_.end() || at->second.puts == put) {
      auto message = std::make_shared<Message>();
      message->bytes = bytes;
      Unmet& unmet = unmet_[key];
      if (unmet.head)
        unmet.tail->next = message;
      else
        unmet = {message, nullptr, put};
      unmet.tail = message.get();
      sg4::this_actor::yield();  // a simcall, as SMPI's post to a mailbox: the ranks take turns as they do there
      return message;
    }
    MessagePtr message = at->second.head;
    at->second.head = message->next;
    message->next = nullptr;
    if (!at->second.head)
      unmet_.erase(at);
    auto size = static_cast<std::uint64_t>((put ? bytes : message->bytes) + ENVELOPE);
    // One simcall starts the transfer and wakes a side that waits for it, as SMPI's match does in the simcall of
    // the post: with one more, this rank would post its next message a turn later than in SMPI.
    simgrid::kernel::actor::simcall_answered([this, &message, src, dst, size] {
      message->comm = sg4::Comm::sendto_async(hosts_[src], hosts_[dst], size);
      if (message->started)
        message->started->release();
    });
    return message;
  }

private:
  struct Unmet {
    MessagePtr head;
    Message* tail;
    bool puts;
  };
  std::vector<sg4::Host*> hosts_;  // per rank
  std::unordered_map<std::uint64_t, Unmet> unmet_;
};

void sleep_if(double seconds)
{
  if (seconds > 0)
    sg4::this_actor::sleep_for(seconds);
}

void finish(const Pending& p, const Costs& costs)
{
  if (!p.message->comm) {  // the other side has not posted yet
    p.message->started = sg4::Semaphore::create(0);
    p.message->started->acquire();
  }
  p.message->comm->wait();
  if (p.recv && p.bytes < DETACH_BELOW)
    sleep_if(costs.orecv);
}

void replay(int rank, const std::vector<Action>* actions, Matcher* matcher, Costs costs, double* finished)
{
  std::unordered_map<std::uint64_t, Pending> pending;
  for (const Action& a : *actions) {
    switch (a.kind) {
      case Kind::isend:
      case Kind::send: {
        bool detached = a.bytes < DETACH_BELOW;
        sleep_if(a.kind == Kind::isend ? costs.ois : detached ? costs.os : 0);
        Pending p{matcher->post(rank, a.peer, true, a.bytes), a.bytes, false};
        if (detached)  // the sender goes on; the receiver waits for it
          break;
        if (a.kind == Kind::send)
          finish(p, costs);
        else
          pending[request_key(a.peer, a.tag, true)] = p;
        break;
      }
      case Kind::irecv:
      case Kind::recv: {
        Pending p{matcher->post(a.peer, rank, false, a.bytes), a.bytes, true};
        if (a.kind == Kind::recv)
          finish(p, costs);
        else
          pending[request_key(a.peer, a.tag, false)] = p;
        break;
      }
      case Kind::wait: {
        auto found = pending.find(request_key(a.peer, a.tag, a.sent));
        if (found != pending.end()) {  // none for a detached send: it was finished when posted
          Pending p = found->second;
          pending.erase(found);
          finish(p, costs);
        }
        break;
      }
      case Kind::compute:
        sg4::this_actor::execute(a.bytes);
        break;
    }
  }
  for (const auto& [_, p] : pending)  // what the trace never waited for, as SMPI's replay does at its end
    finish(p, costs);
  *finished = sg4::Engine::get_clock();
}

// --scale and SMPI's message costs, --cfg=smpi/os:S and the like, taken out of the arguments before the engine
// reads them
Options take_options(int& argc, char* argv[])
{
  Options options;
  Costs& costs = options.costs;
  const std::pair<std::string, double*> known[] = {{"--cfg=smpi/os:", &costs.os},
                                                   {"--cfg=smpi/ois:", &costs.ois},
                                                   {"--cfg=smpi/or:", &costs.orecv},
                                                   {"--scale=", &options.scale}};
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    auto match = std::find_if(std::begin(known), std::end(known), [&](auto& k) { return arg.rfind(k.first, 0) == 0; });
    if (match == std::end(known)) {
      argv[kept++] = argv[i];
      continue;
    }
    try {
      *match->second = std::stod(arg.substr(match->first.size()));
    } catch (const std::exception&) {
      fail("cannot read " + arg + " (a number: seconds for a cost, one value for every size)");
    }
  }
  argc = kept;
  return options;
}

}  // namespace

int main(int argc, char* argv[])
{
  Options options = take_options(argc, argv);
  sg4::Engine engine(&argc, argv);  // takes the other --cfg=... and --log=... options out of argv
  std::vector<std::string> paths(argv + 1, argv + argc);
  if (paths.size() != 3)
    fail("usage: s4u_replay PLATFORM HOSTFILE LISTING [--scale=F] [--cfg=smpi/os:S] [--cfg=smpi/ois:S] "
         "[--cfg=smpi/or:S] [--cfg=...]");
  sg4::Engine::set_config("network/model:SMPI");  // as smpirun sets them
#if SIMGRID_VERSION_MAJOR > 3 || SIMGRID_VERSION_MINOR >= 34
  sg4::Engine::set_config("precision/timing:1e-9");
#else  // Debian's 3.32: the same key by its old name (3.34 renamed it)
  sg4::Engine::set_config("surf/precision:1e-9");
#endif
  engine.load_platform(paths[0]);

  std::ifstream hostfile(paths[1]), listing(paths[2]);
  std::vector<std::string> hosts, traces;
  for (std::string name; hostfile >> name;)
    hosts.push_back(name);
  for (std::string name; listing >> name;)
    traces.push_back(name);
  if (traces.empty() || hosts.size() < traces.size())
    fail("the hostfile names " + std::to_string(hosts.size()) + " hosts for " + std::to_string(traces.size()) +
         " traces");

  std::vector<sg4::Host*> placed;
  for (size_t rank = 0; rank < traces.size(); rank++) {
    placed.push_back(engine.host_by_name_or_null(hosts[rank]));
    if (!placed.back())
      fail("no host " + hosts[rank] + " in " + paths[0]);
  }
  Matcher matcher(placed);
  std::vector<std::vector<Action>> actions(traces.size());
  std::vector<double> finished(traces.size(), 0);
  for (size_t rank = 0; rank < traces.size(); rank++) {
    actions[rank] = read_trace(traces[rank], static_cast<int>(rank), options.scale);
    std::string name = "rank" + std::to_string(rank);
    int r = static_cast<int>(rank);
#if SIMGRID_VERSION_MAJOR >= 4
    placed[rank]->add_actor(name, replay, r, &actions[rank], &matcher, options.costs, &finished[rank]);
#else  // Debian's 3.32
    sg4::Actor::create(name, placed[rank], replay, r, &actions[rank], &matcher, options.costs, &finished[rank]);
#endif
  }
  engine.run();
  std::printf("Simulation time %.17g\n", *std::max_element(finished.begin(), finished.end()));
  return 0;
}
