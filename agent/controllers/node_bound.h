// The controllers of a virtual node are members of the VirtualNode that wires
// them. Their asynchronous callbacks (API replies, timers, runtime sinks,
// deferred retries) must not run once that node is gone, nor let it go in the
// middle of a call: each one is wrapped by guard(), which locks the node first.
#pragma once

#include <memory>
#include <utility>

namespace sk::agent {

class NodeBound {
  public:
    // The owning VirtualNode (a shared_ptr's weak view); until it is set,
    // guarded callbacks do nothing.
    void bind(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  protected:
    template <class F>
    auto guard(F fn) const {
        return [w = owner_, fn = std::move(fn)](auto &&...args) {
            if (auto keep = w.lock()) fn(std::forward<decltype(args)>(args)...);
        };
    }

  private:
    std::weak_ptr<void> owner_;
};

}  // namespace sk::agent
