// CPU stand-in for sequence-parallel attention: ranks as threads, tensors exchanged through
// mailboxes, partials merged through the LSE (dist.hpp has the contract).
//
// Why threads rather than a sequential loop over ranks: the ranks then really run concurrently,
// in whatever order the scheduler picks, so a result that depended on which message arrived
// first would show up as a bitwise difference between runs (the tests perturb the timing). Each
// rank touches only its own tensors and what it receives; messages are tensors made for the
// message and never written afterwards, so handing over the handle is a copy in effect.
#include "attest/conformance/dist.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace attest::conformance::dist {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element offset (in elements, from element 0) of multi-index idx, dimension `dim` shifted by `shift`.
std::int64_t offset_of(const Shape& idx, const Shape& strides, int dim, std::int64_t shift) {
  std::int64_t off = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) off += (idx[d] + (static_cast<int>(d) == dim ? shift : 0)) * strides[d];
  return off;
}

// Advances a row-major multi-index over `shape`; false after the last one.
bool next_index(Shape& idx, const Shape& shape) {
  for (std::size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

}  // namespace

Tensor slice(const Tensor& t, int dim, std::int64_t begin, std::int64_t end) {
  Shape shape = t.shape();
  shape[static_cast<std::size_t>(dim)] = end - begin;
  Tensor out(DType::f64, shape);
  if (out.numel() == 0) return out;
  double* dst = out.data<double>();
  Shape idx(shape.size(), 0);
  std::int64_t n = 0;
  do {
    const std::int64_t off = offset_of(idx, t.strides(), dim, begin);
    dst[n++] = t.dtype() == DType::f64 ? t.data<double>()[off] : static_cast<double>(t.data<float>()[off]);
  } while (next_index(idx, shape));
  return out;
}

namespace {

// Writes src (contiguous f64) into dst (f64) starting at `at` along dimension `dim`.
void put(const Tensor& dst, int dim, std::int64_t at, const Tensor& src) {
  if (src.numel() == 0) return;
  const double* s = src.data<double>();
  double* d = dst.data<double>();
  Shape idx(src.shape().size(), 0);
  std::int64_t n = 0;
  do {
    d[offset_of(idx, dst.strides(), dim, at)] = s[n++];
  } while (next_index(idx, src.shape()));
}

// out [B,S,H,Dv] = 0 and lse [B,H,S] = -inf: the result of rows that see no key.
Partial empty_partial(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t dv) {
  Partial r{Tensor(DType::f64, {b, s, h, dv}), Tensor(DType::f64, {b, h, s})};
  if (r.lse.numel() > 0) std::fill_n(r.lse.data<double>(), r.lse.numel(), kNegInf);
  return r;
}

// Calls the attention function and checks what it hands back, so that a wrong shape is reported
// here rather than read out of bounds later.
Partial call(const AttentionFn& attention, const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  Partial r = attention(p, q, k, v);
  const Shape out{p.batch, p.seqlen_q, p.heads_q, p.head_dim_v}, lse{p.batch, p.heads_q, p.seqlen_q};
  if (r.out.dtype() != DType::f64 || r.out.shape() != out || r.lse.dtype() != DType::f64 || r.lse.shape() != lse)
    throw Error("attention function for '" + to_string(p) + "' returned out " + shape_string(r.out.shape()) +
                " and lse " + shape_string(r.lse.shape()) + ", expected f64 " + shape_string(out) + " and " +
                shape_string(lse));
  return r;
}

// A piece of the global problem p with s queries, t keys and the given mask (bshd, explicit scale).
Problem piece(const Problem& p, std::int64_t s, std::int64_t t, Mask mask) {
  Problem r = p;
  r.seqlen_q = s;
  r.seqlen_kv = t;
  r.mask = mask;
  r.layout = Layout::bshd;
  r.pad = 0;
  r.softmax_scale = p.scale();
  return r;
}

}  // namespace

// Attention of the query rows [q0, q0 + S') of p (q, f64 contiguous) against its keys
// [k0, k0 + T') (k, v), with p's mask in global positions. Global query i sees keys j <= i + off
// (off = 0 for causal_tl, T - S for causal_br), so local row i' sees local keys j' <= i' + d with
// d = q0 + off - k0. Rows i' < r0 = -d see nothing (0, -inf, no call); rows that see a proper
// prefix form [r0, r1) with r1 = T' - d and see local keys j' <= i' + d, which is causal_br on
// those rows and the first r1 + d keys; rows from r1 on see the whole block (mask none). So every
// call is a plain Problem, and every visible (query, key) pair is in exactly one call.
Partial block_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t q0,
                        std::int64_t k0, const AttentionFn& attention) {
  for (const Tensor* x : {&q, &k, &v})
    if (x->dtype() != DType::f64 || x->rank() != 4 || !x->is_contiguous())
      throw Error("block_attention: q, k and v must be contiguous f64 [B,S,H,D] tensors (as slice makes)");
  const std::int64_t s = q.dim(1), t = k.dim(1);
  if (s == 0 || t == 0) return empty_partial(p.batch, s, p.heads_q, p.head_dim_v);
  if (p.mask == Mask::none) return call(attention, piece(p, s, t, Mask::none), q, k, v);
  Partial r = empty_partial(p.batch, s, p.heads_q, p.head_dim_v);
  const std::int64_t off = p.mask == Mask::causal_br ? p.seqlen_kv - p.seqlen_q : 0;
  const std::int64_t d = q0 + off - k0;
  const std::int64_t r0 = std::clamp<std::int64_t>(-d, 0, s);
  const std::int64_t r1 = std::clamp<std::int64_t>(t - d, r0, s);
  auto place = [&](std::int64_t row, const Partial& part) {
    put(r.out, 1, row, part.out);
    put(r.lse, 2, row, part.lse);
  };
  if (r0 < r1) {
    const std::int64_t keys = r1 + d;  // >= r0 + d + 1 >= 1
    place(r0, call(attention, piece(p, r1 - r0, keys, Mask::causal_br), slice(q, 1, r0, r1), slice(k, 1, 0, keys),
                   slice(v, 1, 0, keys)));
  }
  if (r1 < s) place(r1, call(attention, piece(p, s - r1, t, Mask::none), slice(q, 1, r1, s), k, v));
  return r;
}

namespace {

// Point-to-point messages between ranks, addressed by (to, from, tag): a receive waits for its
// own message whatever else arrives first. One lock for all ranks: a stand-in, not a transport.
class Network {
 public:
  struct Aborted {};  // thrown by recv once another rank has failed

  void send(int from, int to, int tag, std::vector<Tensor> msg) {
    {
      std::lock_guard lock(mu_);
      box_[{to, from, tag}] = std::move(msg);
    }
    cv_.notify_all();
  }

  std::vector<Tensor> recv(int to, int from, int tag) {
    std::unique_lock lock(mu_);
    const auto key = std::make_tuple(to, from, tag);
    cv_.wait(lock, [&] { return aborted_ || box_.count(key) > 0; });
    if (aborted_) throw Aborted{};
    auto node = box_.extract(key);
    return std::move(node.mapped());
  }

  void abort() {
    {
      std::lock_guard lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::vector<Tensor>> box_;
  bool aborted_ = false;
};

// Runs body(rank, net) on `ranks` threads; rethrows the first failure after every thread ended
// (the others are woken from their receives by the abort).
void run_ranks(int ranks, const std::function<void(int, Network&)>& body) {
  Network net;
  std::mutex err_mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, net);
      } catch (const Network::Aborted&) {
      } catch (...) {
        {
          std::lock_guard lock(err_mu);
          if (!first) first = std::current_exception();
        }
        net.abort();
      }
    });
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
}

std::string list(std::span<const std::int64_t> v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The refusals shared by both schemes; returns the rank count.
int check_split(const char* who, const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                std::span<const std::int64_t> q_bounds, std::span<const std::int64_t> kv_bounds) {
  const std::string w = who;
  if (auto st = p.validate(); !st) throw Error(w + ": problem '" + to_string(p) + "': " + st.reason());
  if (p.ragged()) throw Error(w + ": ragged problems (cu_seqlens) are not supported");
  if (q_bounds.size() < 2)
    throw Error(w + ": ranks must be >= 1 (q_bounds " + list(q_bounds) + " has " + std::to_string(q_bounds.size()) +
                " entries, ranks + 1)");
  if (kv_bounds.size() != q_bounds.size())
    throw Error(w + ": kv_bounds " + list(kv_bounds) + " and q_bounds " + list(q_bounds) +
                " give different rank counts");
  for (auto [name, b, len] :
       {std::tuple{"q_bounds", q_bounds, p.seqlen_q}, std::tuple{"kv_bounds", kv_bounds, p.seqlen_kv}})
    if (b.front() != 0 || b.back() != len || !std::is_sorted(b.begin(), b.end()))
      throw Error(w + ": " + name + " " + list(b) + " must run from 0 to " + std::to_string(len) +
                  " without decreasing");
  const Shape want[3] = {{p.batch, p.seqlen_q, p.heads_q, p.head_dim},
                         {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim},
                         {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v}};
  const Tensor* got[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (got[i]->dtype() != DType::f64 && got[i]->dtype() != DType::f32)
      throw Error(w + ": " + "qkv"[i] + " must be f32 or f64");
    if (got[i]->shape() != want[i])
      throw Error(w + ": " + "qkv"[i] + " has shape " + shape_string(got[i]->shape()) + ", expected " +
                  shape_string(want[i]));
  }
  return static_cast<int>(q_bounds.size() - 1);
}

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

}  // namespace

std::vector<std::int64_t> even_split(std::int64_t length, std::int64_t ranks) {
  if (ranks < 1) throw Error("even_split: ranks must be >= 1 (got " + std::to_string(ranks) + ")");
  if (length < 0) throw Error("even_split: length must be >= 0 (got " + std::to_string(length) + ")");
  std::vector<std::int64_t> b{0};
  for (std::int64_t r = 0; r < ranks; ++r) b.push_back(b.back() + length / ranks + (r < length % ranks ? 1 : 0));
  return b;
}

Partial merge_partials(std::span<const Partial> parts) {
  if (parts.empty()) throw Error("merge_partials: no partials to merge");
  const Shape& os = parts[0].out.shape();
  const Shape& ls = parts[0].lse.shape();
  if (os.size() != 4 || ls != Shape{os[0], os[2], os[1]})
    throw Error("merge_partials: out " + shape_string(os) + " and lse " + shape_string(ls) +
                " are not [B,S,H,Dv] and [B,H,S]");
  for (const auto& part : parts)
    if (part.out.shape() != os || part.lse.shape() != ls || part.out.dtype() != DType::f64 ||
        part.lse.dtype() != DType::f64 || !part.out.is_contiguous() || !part.lse.is_contiguous())
      throw Error("merge_partials: partial out " + shape_string(part.out.shape()) + " / lse " +
                  shape_string(part.lse.shape()) + " differs from " + shape_string(os) + " / " + shape_string(ls) +
                  " (all must be contiguous f64)");
  const std::int64_t nb = os[0], ns = os[1], nh = os[2], dv = os[3];
  Partial r = empty_partial(nb, ns, nh, dv);
  const std::size_t n = parts.size();
  std::vector<double> lse_i(n), w(n);
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t s = 0; s < ns; ++s) {
        const std::int64_t li = (b * nh + h) * ns + s, oi = ((b * ns + s) * nh + h) * dv;
        double m = kNegInf;
        bool nan = false;
        for (std::size_t i = 0; i < n; ++i) {
          lse_i[i] = parts[i].lse.data<double>()[li];
          nan = nan || std::isnan(lse_i[i]);
          m = std::max(m, lse_i[i]);
        }
        double* out = r.out.data<double>() + oi;
        if (nan) {
          r.lse.data<double>()[li] = std::numeric_limits<double>::quiet_NaN();
          std::fill_n(out, dv, std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        if (m == kNegInf) continue;  // no partial saw a key: out = 0, lse = -inf (as made)
        // Sums in the order given; -inf partials are skipped, not multiplied by exp(-inf) = 0,
        // so their out (0 by convention, but any value) cannot turn into NaN.
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i)
          if (lse_i[i] != kNegInf) sum += std::exp(lse_i[i] - m);
        const double lse = m + std::log(sum);
        r.lse.data<double>()[li] = lse;
        for (std::size_t i = 0; i < n; ++i) w[i] = lse_i[i] == kNegInf ? 0.0 : std::exp(lse_i[i] - lse);
        for (std::int64_t d = 0; d < dv; ++d) {
          double acc = 0;
          for (std::size_t i = 0; i < n; ++i)
            if (lse_i[i] != kNegInf) acc += w[i] * parts[i].out.data<double>()[oi + d];
          out[d] = acc;
        }
      }
  return r;
}

Partial ring_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       std::span<const std::int64_t> q_bounds, std::span<const std::int64_t> kv_bounds,
                       const AttentionFn& attention) {
  const int n = check_split("ring_attention", p, q, k, v, q_bounds, kv_bounds);
  std::vector<Partial> shard_result(at(n));
  run_ranks(n, [&](int r, Network& net) {
    const Tensor qs = slice(q, 1, q_bounds[at(r)], q_bounds[at(r + 1)]);
    Tensor kb = slice(k, 1, kv_bounds[at(r)], kv_bounds[at(r + 1)]);
    Tensor vb = slice(v, 1, kv_bounds[at(r)], kv_bounds[at(r + 1)]);
    std::vector<Partial> parts(at(n));
    // At step s rank r holds K/V block (r - s) mod n: block r at the start, then each step the
    // block its left neighbour held.
    for (int step = 0; step < n; ++step) {
      const int blk = ((r - step) % n + n) % n;
      if (step > 0) {
        auto msg = net.recv(r, (r + n - 1) % n, step);
        kb = std::move(msg[0]);
        vb = std::move(msg[1]);
      }
      // Pass the block on before computing with it, as a real ring overlaps transfer and compute.
      if (step + 1 < n) net.send(r, (r + 1) % n, step + 1, {kb, vb});
      parts[at(blk)] = block_attention(p, qs, kb, vb, q_bounds[at(r)], kv_bounds[at(blk)], attention);
    }
    // Ascending block index, whatever the arrival order: the merge is then one fixed sequence of
    // roundings, the same as merge_partials over the same partials outside the ring.
    shard_result[at(r)] = merge_partials(parts);
  });
  Partial r = empty_partial(p.batch, p.seqlen_q, p.heads_q, p.head_dim_v);
  for (int i = 0; i < n; ++i) {
    put(r.out, 1, q_bounds[at(i)], shard_result[at(i)].out);
    put(r.lse, 2, q_bounds[at(i)], shard_result[at(i)].lse);
  }
  return r;
}

Partial ulysses_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                          std::span<const std::int64_t> q_bounds, std::span<const std::int64_t> kv_bounds,
                          const AttentionFn& attention) {
  const int n = check_split("ulysses_attention", p, q, k, v, q_bounds, kv_bounds);
  if (p.heads_q % n != 0 || p.heads_kv % n != 0)
    throw Error("ulysses_attention: heads_q " + std::to_string(p.heads_q) + " and heads_kv " +
                std::to_string(p.heads_kv) + " must both be divisible by the rank count " + std::to_string(n));
  // Rank t owns query heads [t*hq, (t+1)*hq) and KV heads [t*hk, (t+1)*hk); with hq/hk = the GQA
  // group, query head h keeps its KV head h / group inside the shard.
  const std::int64_t hq = p.heads_q / n, hk = p.heads_kv / n;
  std::vector<Partial> shard_result(at(n));
  run_ranks(n, [&](int r, Network& net) {
    const std::int64_t q0 = q_bounds[at(r)], q1 = q_bounds[at(r + 1)];
    const Tensor qs = slice(q, 1, q0, q1);
    const Tensor ks = slice(k, 1, kv_bounds[at(r)], kv_bounds[at(r + 1)]);
    const Tensor vs = slice(v, 1, kv_bounds[at(r)], kv_bounds[at(r + 1)]);
    // All-to-all 1: my sequence shard of rank t's heads goes to rank t.
    for (int t = 0; t < n; ++t)
      net.send(
          r, t, 0,
          {slice(qs, 2, t * hq, (t + 1) * hq), slice(ks, 2, t * hk, (t + 1) * hk), slice(vs, 2, t * hk, (t + 1) * hk)});
    Tensor qh(DType::f64, {p.batch, p.seqlen_q, hq, p.head_dim});
    Tensor kh(DType::f64, {p.batch, p.seqlen_kv, hk, p.head_dim});
    Tensor vh(DType::f64, {p.batch, p.seqlen_kv, hk, p.head_dim_v});
    for (int src = 0; src < n; ++src) {
      const auto msg = net.recv(r, src, 0);
      put(qh, 1, q_bounds[at(src)], msg[0]);
      put(kh, 1, kv_bounds[at(src)], msg[1]);
      put(vh, 1, kv_bounds[at(src)], msg[2]);
    }
    Problem ph = piece(p, p.seqlen_q, p.seqlen_kv, p.mask);
    ph.heads_q = hq;
    ph.heads_kv = hk;
    const Partial res = call(attention, ph, qh, kh, vh);
    // All-to-all 2: rank t's sequence shard of my heads goes back to rank t.
    for (int t = 0; t < n; ++t)
      net.send(r, t, 1,
               {slice(res.out, 1, q_bounds[at(t)], q_bounds[at(t + 1)]),
                slice(res.lse, 2, q_bounds[at(t)], q_bounds[at(t + 1)])});
    Partial mine = empty_partial(p.batch, q1 - q0, p.heads_q, p.head_dim_v);
    for (int src = 0; src < n; ++src) {
      const auto msg = net.recv(r, src, 1);
      put(mine.out, 2, src * hq, msg[0]);
      put(mine.lse, 1, src * hq, msg[1]);
    }
    shard_result[at(r)] = std::move(mine);
  });
  Partial r = empty_partial(p.batch, p.seqlen_q, p.heads_q, p.head_dim_v);
  for (int i = 0; i < n; ++i) {
    put(r.out, 1, q_bounds[at(i)], shard_result[at(i)].out);
    put(r.lse, 2, q_bounds[at(i)], shard_result[at(i)].lse);
  }
  return r;
}

}  // namespace attest::conformance::dist
