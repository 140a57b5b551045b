// The element-wise sums under every backend's all_sum, and the HMAC used by
// the handshake, against plain references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dist/net/auth.h"
#include "dist/net/socket.h"
#include "dist/reduce.h"
#include "tensor/f16.h"

namespace orchard::dist {
namespace {

TEST(Reduce, SumSourcesAddsInRankOrderForEveryDtype) {
  const int n = 3;
  const size_t count = 1000;
  std::vector<std::vector<float>> f(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) f[r][i] = std::sin(static_cast<float>(i * (r + 1)));
  std::vector<float> out(count);
  const void* srcs[3] = {f[0].data(), f[1].data(), f[2].data()};
  sum_sources(out.data(), srcs, n, count, DType::F32);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], (f[0][i] + f[1][i]) + f[2][i]);

  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<std::vector<uint16_t>> h(n, std::vector<uint16_t>(count));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) h[r][i] = t == DType::F16 ? fp32_to_fp16(f[r][i]) : fp32_to_bf16(f[r][i]);
    std::vector<uint16_t> o(count);
    const void* hs[3] = {h[0].data(), h[1].data(), h[2].data()};
    sum_sources(o.data(), hs, n, count, t);
    auto wide = [&](uint16_t v) { return t == DType::F16 ? fp16_to_fp32(v) : bf16_to_fp32(v); };
    for (size_t i = 0; i < count; ++i) {
      const float want = (wide(h[0][i]) + wide(h[1][i])) + wide(h[2][i]);
      ASSERT_EQ(o[i], t == DType::F16 ? fp32_to_fp16(want) : fp32_to_bf16(want)) << i;
    }
    // add_into: dst += src, rounded once.
    std::vector<uint16_t> acc = h[0];
    add_into(acc.data(), h[1].data(), count, t);
    for (size_t i = 0; i < count; ++i) {
      const float want = wide(h[0][i]) + wide(h[1][i]);
      ASSERT_EQ(acc[i], t == DType::F16 ? fp32_to_fp16(want) : fp32_to_bf16(want));
    }
  }
}

TEST(Auth, MacDependsOnSecretRoleAndNonces) {
  const net::Nonce a = net::random_nonce(), b = net::random_nonce();
  EXPECT_NE(a, b);
  const net::Mac m = net::auth_mac("s", 'C', a, b, "ctx");
  EXPECT_TRUE(net::macs_equal(m, net::auth_mac("s", 'C', a, b, "ctx")));
  EXPECT_FALSE(net::macs_equal(m, net::auth_mac("t", 'C', a, b, "ctx")));
  EXPECT_FALSE(net::macs_equal(m, net::auth_mac("s", 'A', a, b, "ctx")));
  EXPECT_FALSE(net::macs_equal(m, net::auth_mac("s", 'C', b, a, "ctx")));
  EXPECT_FALSE(net::macs_equal(m, net::auth_mac("s", 'C', a, b, "ctx2")));
}

TEST(Endpoint, ParsesHostPortAndRejectsJunk) {
  const net::Endpoint e = net::parse_endpoint("10.0.0.2:7010", "X");
  EXPECT_EQ(e.host, "10.0.0.2");
  EXPECT_EQ(e.port, 7010);
  for (const char* bad : {"10.0.0.2", ":80", "host:", "host:99999", "host:12ab"})
    EXPECT_THROW(net::parse_endpoint(bad, "ORCHARD_COORD"), CommError) << bad;
}

}  // namespace
}  // namespace orchard::dist
