// Bundles entry.jsx into one browser script and its stylesheet (see README.md beside this file).
//
// What the packages load only when asked (import(): the code highlighter's languages and themes, diagrams,
// the developer inspector, maths fonts) is left out, as an app's bundler leaves it for a later chunk: such an
// import names a module no page can resolve, so it fails where it is reached, without a request, and what
// loads at start is the whole of what the tests run.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { build } from "esbuild";

const LEFT_OUT = "copilotkit-test-page-left-out/";

const leaveOutLazyImports = {
  name: "leave-out-lazy-imports",
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /.*/ }, (args) =>
      args.kind === "dynamic-import" ? { path: LEFT_OUT + args.path, external: true } : undefined);
  },
};

const result = await build({
  entryPoints: ["entry.jsx"],
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2020",
  minify: true,
  legalComments: "none",
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  loader: { ".woff": "empty", ".woff2": "empty", ".ttf": "empty" },
  banner: {
    js: "/*! CopilotKit 1.74.0 (MIT), React 19.3.1 (MIT), @ag-ui/client 1.0.0 (MIT) and what they bundle, built " +
        "with esbuild 0.28.2 for the browser tests: see copilotkit.LICENSE and README.md beside this file. */",
  },
  plugins: [leaveOutLazyImports],
  metafile: true,
  outfile: "dist/copilotkit.min.js",
  logLevel: "warning",
});

// The licences of what the script holds: each package (each version of it) esbuild put code of into it.
const packageDirs = new Set();
for (const output of Object.values(result.metafile.outputs)) {
  for (const [path, input] of Object.entries(output.inputs)) {
    const found = path.match(/^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\/(?!.*node_modules\/)/);
    if (found && input.bytesInOutput > 0) packageDirs.add(found[1]);
  }
}
const sections = [];
for (const dir of [...packageDirs].sort()) {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const named = manifest.license ?? manifest.licenses;  // `licenses`: an older package.json's list
  const licence = typeof named === "string" ? named : [named].flat().map((entry) => entry?.type ?? "?").join(" OR ");
  const files = readdirSync(dir).filter((name) => /^(licen[cs]e|copying|notice)/i.test(name)).sort();
  const texts = files.map((name) => readFileSync(join(dir, name), "utf8").trim());
  sections.push(`${manifest.name} ${manifest.version} (${licence})\n\n` +
                (texts.length ? texts.join("\n\n") : "(The package ships no licence file; its package.json names the licence above.)"));
}
writeFileSync("dist/copilotkit.LICENSE",
              "The licences of the packages bundled into copilotkit.min.js and copilotkit.min.css, one section each.\n\n" +
              sections.join(`\n\n${"=".repeat(78)}\n\n`) + "\n");
console.log(`${sections.length} packages`);
