// Reference measurement for src/face: runs the real @vladmandic/face-api 1.7.15 JavaScript
// (tiny face detector + 68-point landmark net) on a PNG with the pure-JS tfjs CPU backend and
// writes the detection box, score and 68 landmarks as JSON to OUT.JSON. Not used by the tests; rerun with:
//   mkdir -p /tmp/faceref && cd /tmp/faceref && npm init -y &&
//   npm install @tensorflow/tfjs@4.22.0 @tensorflow/tfjs-backend-wasm@4.22.0 @vladmandic/face-api@1.7.15 pngjs@7
//   NODE_PATH=/tmp/faceref/node_modules node scripts/reference/face_api_reference.js \
//     examples/portrait.png ~/.cache/talker/assets/face-api tests/data/face/astronaut-reference.json
const fs = require('fs');
const path = require('path');
const { PNG } = require('pngjs');
const faceapi = require('@vladmandic/face-api/dist/face-api.node-wasm.js');

const { tf } = faceapi;

function loadWeightMap(dir, name) {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, `${name}-weights_manifest.json`), 'utf8'));
  const specs = manifest.flatMap((group) => group.weights);
  const buffers = manifest.flatMap((group) => group.paths.map((p) => fs.readFileSync(path.join(dir, p))));
  const joined = Buffer.concat(buffers);
  const data = joined.buffer.slice(joined.byteOffset, joined.byteOffset + joined.byteLength);
  return tf.io.decodeWeights(data, specs);
}

async function main() {
  const [pngPath, modelDir, outPath] = process.argv.slice(2);
  await tf.setBackend('cpu');
  await tf.ready();
  await faceapi.nets.tinyFaceDetector.loadFromWeightMap(loadWeightMap(modelDir, 'tiny_face_detector_model'));
  await faceapi.nets.faceLandmark68Net.loadFromWeightMap(loadWeightMap(modelDir, 'face_landmark_68_model'));

  const png = PNG.sync.read(fs.readFileSync(pngPath));
  const rgb = new Int32Array(png.width * png.height * 3);
  for (let i = 0; i < png.width * png.height; i++) {
    rgb[i * 3] = png.data[i * 4];
    rgb[i * 3 + 1] = png.data[i * 4 + 1];
    rgb[i * 3 + 2] = png.data[i * 4 + 2];
  }
  const input = tf.tensor3d(rgb, [png.height, png.width, 3], 'int32');
  const options = new faceapi.TinyFaceDetectorOptions({ inputSize: 416, scoreThreshold: 0.5 });
  const all = await faceapi.detectAllFaces(input, options);
  const result = await faceapi.detectSingleFace(input, options).withFaceLandmarks();
  const { box } = result.detection;
  fs.writeFileSync(outPath, `${JSON.stringify({
    produced_by: 'scripts/reference/face_api_reference.js: @vladmandic/face-api 1.7.15 (face-api.node-wasm.js), '
      + '@tensorflow/tfjs 4.22.0 CPU backend, node ' + process.version
      + '; detectSingleFace(TinyFaceDetectorOptions{inputSize:416,scoreThreshold:0.5}).withFaceLandmarks() on the decoded PNG as an int32 tensor',
    image: path.basename(pngPath),
    image_size: [png.width, png.height],
    faces_found: all.length,
    box: [box.x, box.y, box.width, box.height],
    score: result.detection.score,
    landmarks: result.landmarks.positions.map((p) => [p.x, p.y]),
  }, null, 1).replace(/\[\s+([-\d.e]+),\s+([-\d.e]+)(?:,\s+([-\d.e]+),\s+([-\d.e]+))?\s+\]/g, (m, a, b, c, d) => `[${[a, b, c, d].filter((v) => v !== undefined).join(', ')}]`)}\n`);
}

main().catch((e) => { console.error(e); process.exit(1); });
