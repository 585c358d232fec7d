// cli/plan_image — `loch plan` for an image model: its options and its report (cmd_plan_image.cpp).
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "plan/diffusion.hpp"

namespace loch::cli {

struct ImagePlanOptions {
    std::uint32_t width = 0, height = 0;
    std::map<std::string, std::string> components;  // clip_l, t5xxl, vae, taesd … → path
    plan::DiffusionOptions opts;
};

void add_image_plan_options(CLI::App& cmd, ImagePlanOptions& o);
bool is_image_plan(const ImagePlanOptions& o);
void run_image_plan(const ImagePlanOptions& o, const std::string& file, const std::string& device,
                    const std::string& fit, bool json);

}  // namespace loch::cli
