// timing_setup.cpp: the event model's set-up pass over a program
// (timing_parts.hpp): per-engine streams, each transfer's DMA engines and
// HBM bytes, and the byte and instruction tallies.
#include "cost_rules.hpp"
#include "timing_parts.hpp"

namespace tessel::sim::timing_detail {

namespace {

/// Adds `in` to the byte and instruction tallies (in program order, as
/// the sums have always been taken).
void tally(program_tallies& t, const instruction& in, memory src, memory dst) {
  t.instructions += in.count;
  if (in.kind == op::dma) {
    const double bytes = static_cast<double>(in.count) * in.partitions * in.free;
    if (src == memory::hbm) t.hbm_read_bytes += bytes;
    if (dst == memory::hbm) t.hbm_write_bytes += bytes;
    if (src == memory::sbuf || dst == memory::sbuf) t.sbuf_dma_bytes += bytes;
  } else if (in.kind == op::matmul || in.kind == op::transpose) {
    const double rows = in.kind == op::matmul ? in.aux : in.free;
    const double cols = in.kind == op::matmul ? in.free : in.partitions;
    t.psum_write_bytes += static_cast<double>(in.count) * rows * cols * 4;
  }
}

}  // namespace

program_tallies prepare(const program& p, const machine& m, engine_streams& streams,
                        dma_sharing& sharing, std::vector<memory>& where) {
  for (auto& st : streams) st.clear();
  // buffer ids are checked once here, not per instruction
  where.clear();
  for (const auto& b : p.buffers()) where.push_back(b.where);
  last_value<dma_engine_mask, &instruction::partition_offset, &instruction::partitions> dma_mask;
  program_tallies t;
  const auto& ins = p.instructions();
  for (std::size_t i = 0; i < ins.size(); ++i) {
    const auto& in = ins[i];
    const auto id = static_cast<std::uint32_t>(i);
    streams[in.engine].push_back(id);
    const bool dma_engine = is_dma(in.engine);
    const bool reads_buffers = dma_engine || in.kind == op::dma;
    const memory src = reads_buffers ? where.at(in.src) : memory::sbuf;
    const memory dst = reads_buffers ? where.at(in.dst) : memory::sbuf;
    tally(t, in, src, dst);
    if (dma_engine) {
      const bool hbm = src == memory::hbm || dst == memory::hbm;
      sharing.describe(id, dma_mask.get(in, m),
                       hbm ? static_cast<double>(in.count) * in.partitions * in.free : 0);
    }
  }
  return t;
}

}  // namespace tessel::sim::timing_detail
