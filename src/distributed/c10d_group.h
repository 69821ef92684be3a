// Internal: a Communicator over any c10d::Backend, and the two constructors of backends, each
// in its own file so that only it sees Gloo's or NCCL's headers.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "frugal/distributed/communicator.h"

namespace frugal::dist::detail {

class C10dGroup final : public Communicator {
 public:
  // `store`: the job's rendezvous store, where sub-groups meet.
  C10dGroup(RankInfo info, c10::Device device, c10::intrusive_ptr<c10d::Backend> backend,
            std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Store> store);
  std::string backend() const override { return name_; }

 protected:
  Work do_all_reduce(at::Tensor& tensor, Reduce op) override;
  Work do_broadcast(at::Tensor& tensor, int root) override;
  Work do_all_gather(at::Tensor& output, const at::Tensor& input) override;
  Work do_reduce_scatter(at::Tensor& output, const at::Tensor& input) override;
  Work do_barrier() override;
  std::shared_ptr<Communicator> do_subgroup(const std::string& name, RankInfo info) override;

 private:
  Work wrap(c10::intrusive_ptr<c10d::Work> work, const char* op);

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
};

// A Communicator of `backend` ("gloo" or "nccl") for `info`, meeting through `store`.
std::shared_ptr<Communicator> make_group(const std::string& backend, const RankInfo& info,
                                         const c10::intrusive_ptr<c10d::Store>& store,
                                         std::chrono::milliseconds timeout);

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const RankInfo& info,
                                                    std::chrono::milliseconds timeout);
// Also makes cuda:LOCAL_RANK the current device.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const RankInfo& info,
                                                    std::chrono::milliseconds timeout);

}  // namespace frugal::dist::detail
