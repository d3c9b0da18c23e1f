// Shape-defined waves: groups of chains (or chain pairs) of one head whose
// reduction orders interleave, so the members wait on each other in both
// directions and must run at the same time.
//
// A wave is a function of the head's shape and of kMaxWaveSize only, never of
// the SM count at hand: the reduction orders, hence the bits, are the same on
// every GPU, grid size and concurrent load.
#pragma once

#include "dash_attn/host_device.hpp"

namespace dash_attn::schedule {

// The most members a wave may have; the kernel must guarantee this many
// co-resident CTAs (one per SM) to run a wave schedule. 64 fits every Hopper
// part we support with room to spare (H20: 78 SMs, H100 PCIe/H800 PCIe: 114,
// H100/H200/H800 SXM: 132), leaves SMs for a concurrent kernel (an sm_margin),
// and still puts a whole head of an 8k sequence (64 KV tiles of 128) in one wave.
inline constexpr int kMaxWaveSize = 64;

// `units` consecutive units (chains or pairs, in-head order) split into
// ceil(units / cap) waves of nearly equal size: waves of 33 and 32 rather
// than 64 and 1, so no wave is a straggler that serializes alone.
struct WaveSplit {
  int units = 0;
  int size = 1;  // members of every wave but possibly the last

  DASH_HOST_DEVICE static WaveSplit make(int units, int cap) {
    if (cap < 1) cap = 1;
    if (units < 1) return WaveSplit{0, 1};
    const int count = (units + cap - 1) / cap;
    return WaveSplit{units, (units + count - 1) / count};
  }

  DASH_HOST_DEVICE int wave_of(int unit) const { return unit / size; }
  DASH_HOST_DEVICE int first_of(int wave) const { return wave * size; }
  DASH_HOST_DEVICE int length_of(int wave) const {
    const int rest = units - wave * size;
    return rest < size ? rest : size;
  }
};

}  // namespace dash_attn::schedule
