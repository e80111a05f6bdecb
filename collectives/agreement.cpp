#include "collectives/agreement.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {

std::optional<RankFailure> agree_on_failure(ProcessGroup& group, const std::function<void()>& fn) {
  int code = 0;
  std::string message;
  try {
    fn();
  } catch (const InputError& e) {
    code = 2, message = e.what();
  } catch (const std::exception& e) {
    code = 1, message = e.what();
  } catch (...) {
    code = 1, message = "unknown exception";
  }
  if (code != 0 && message.empty()) message = "(an error without a message)";
  // codes[r] = rank r's exit code (0: fine); one max-reduction tells every rank every outcome.
  Tensor codes = Tensor::zeros("agreement.codes", {group.size()}, DType::i64);
  codes.data<int64_t>()[group.rank()] = code;
  group.all_reduce(codes, {.op = ReduceOp::max})->wait();
  RankFailure f;
  f.rank = -1;
  for (int r = 0; r < group.size(); ++r)
    if (codes.data<int64_t>()[r] != 0) {
      if (f.rank < 0) f.rank = r, f.code = int(codes.data<int64_t>()[r]);
      ++f.failed;
    }
  if (f.failed == 0) return std::nullopt;
  // The lowest failing rank's message reaches every rank: its length, then its bytes.
  Tensor length = Tensor::zeros("agreement.length", {1}, DType::i64);
  if (group.rank() == f.rank) length.data<int64_t>()[0] = int64_t(message.size());
  group.broadcast(length, f.rank)->wait();
  Tensor text = Tensor::zeros("agreement.message", {length.data<int64_t>()[0]}, DType::u8);
  if (group.rank() == f.rank) message.copy(static_cast<char*>(text.raw()), message.size());
  group.broadcast(text, f.rank)->wait();
  f.message.assign(static_cast<const char*>(text.raw()), size_t(text.numel()));
  return f;
}

void run_agreed(ProcessGroup& group, const std::function<void()>& fn) {
  const std::optional<RankFailure> f = agree_on_failure(group, fn);
  if (!f) return;
  // Every rank throws; where only some failed, the message says which.
  std::string message = f->message;
  if (f->failed < group.size())
    message = group.name() == "world"
                  ? fmt::format("rank {} of {}: {}", f->rank, group.size(), f->message)
                  : fmt::format("rank {} of group '{}' ({} ranks): {}", f->rank, group.name(),
                                group.size(), f->message);
  if (f->code == 2) throw InputError(message);
  throw Error(message);
}

}  // namespace st
